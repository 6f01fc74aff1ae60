# Sourced by gpu_run.sh and gpu_train.sh on a lent GPU machine: `source benchmarks/gpu_env.sh MODULE...` moves to
# the repository root, installs the carried wheels/ when the image lacks one of the modules named (the device
# image has no pydantic and cannot reach a package index; the top of gpu_run.sh says how to fetch the wheels) and
# points PYTHONPATH at them and at this checkout.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! python3 -c "import $(IFS=,; echo "$*")" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    wheels/*.whl || { echo "carry wheels/ (see the top of benchmarks/gpu_run.sh)"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
