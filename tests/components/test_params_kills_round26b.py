"""Hand-planted mutants of draftsmith.components.params (round 26b) that scripts/mutate.py cannot plant (it skips
annotations): MLAParams.latent_norm_eps is 'config' or a number strictly between 0 and 1 (an eps of 0 divides by
zero on a zero row, one of 1 or more is no norm's eps), its default 'config'."""
import pydantic
import pytest

from draftsmith.components.params import MLAParams


# catches params.py:43 Field(gt=0, lt=1) -> ge=0 (an eps of 0 accepted) and -> le=1 (an eps of 1 accepted)
@pytest.mark.parametrize("eps", [0, 0.0, -1e-6, 1, 1.0, 2.0, "auto", True])
def test_a_latent_norm_eps_outside_0_1_or_no_number_is_refused(eps):
    """0, a negative eps, 1 and above, another word than 'config', a boolean: each refused by the params model."""
    with pytest.raises(pydantic.ValidationError, match="latent_norm_eps"):
        MLAParams(latent_norm_eps=eps)


@pytest.mark.parametrize("eps", [1e-6, 0.5, 0.999, "config"])
def test_a_latent_norm_eps_inside_0_1_or_config_is_kept(eps):
    """A number strictly between 0 and 1, or 'config' (the default: the config's rms_norm_eps), is kept as given."""
    assert MLAParams(latent_norm_eps=eps).latent_norm_eps == eps
    assert MLAParams().latent_norm_eps == "config"
