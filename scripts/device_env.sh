# Sourced by the scripts that run on the device machine: the environment every one of them needs.
# Installs the carried wheels (.whl/: msgspec, google-re2, scipy, jsonschema and what it needs, pyyaml,
# setuptools and wheel (to install kernlint), torch-tb-profiler, for the device's python3), installs kernlint,
# puts the checkout on PYTHONPATH, keeps NVLink multicast off for every process, makes $OUT and records
# the GPU and versions in $OUT/gpu.txt.
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
# kernlint itself, installed (not only importable): its `kernlint` command and its pytest11 entry point, which
# the example-workflow and pytest-plugin tests use. The checkout stays first on PYTHONPATH, so its code runs.
python3 -m pip install -q --no-deps --no-build-isolation --no-index --no-compile --target /tmp/kl "$PWD" \
  >/tmp/kl-install.log 2>&1 || { tail -5 /tmp/kl-install.log; exit 1; }
export PATH=/tmp/kl/bin:$PATH PYTHONPATH=/tmp/site:$PWD:/tmp/kl
# No browser there (and no network to install one): the HTML report tests run in CI, and skip here.
export KERNLINT_SKIP_BROWSER=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'GPUs', torch.cuda.device_count())"; } 2>&1 | tee "$OUT/gpu.txt"
