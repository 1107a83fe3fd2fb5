#!/bin/bash
# Builds CTranslate2 (CPU only) and its Python module from source, for tools/bench_ct2.py and
# tools/bench_whisper.py --ct2. Not part of `make test` or `make all`: run it by hand.
#
#   tools/build_ct2.sh BUILD_DIR CT2_GIT ONEDNN_GIT SPDLOG_GIT CPU_FEATURES_GIT
#
# Each *_GIT is a git directory (a clone or a bare mirror) holding the commit pinned below.
# Afterwards: PYTHONPATH=BUILD_DIR/ct2-src/python /usr/bin/python3 -c 'import ctranslate2'.
#
# Backend, as CTranslate2's own Linux x86-64 wheels are built (python/tools/
# prepare_build_environment_linux.sh): oneDNN 3.1.1, static, inference primitives only.
# The wheels also link Intel MKL, but CTranslate2 uses MKL only on Intel CPUs
# (src/cpu/backend.cc: mayiuse_mkl() is false on other vendors unless CT2_USE_MKL=1):
# on an AMD CPU the wheels' GEMMs (f32 sgemm, int8 u8s8s32) are oneDNN's, so MKL is left out
# here (Debian's main archive has none). OpenMP: GNU's (OPENMP_RUNTIME=COMP), as Intel's
# runtime is not packaged. Kernels: CTranslate2's runtime ISA dispatch (avx512 on Zen 4).
# Needs: cmake, g++, python3-pybind11, python3-setuptools, python3-numpy, python3-yaml.
set -euo pipefail
if [ $# -ne 5 ]; then
  sed -n 4,9p "$0" >&2
  exit 2
fi
BUILD=$(mkdir -p "$1" && cd "$1" && pwd)
CT2_GIT=$2 ONEDNN_GIT=$3 SPDLOG_GIT=$4 CPU_FEATURES_GIT=$5
CT2_COMMIT=0d8bcd362ac75ef860ef161d6f0efad0ae439ff0      # v4.8.1
ONEDNN_COMMIT=v3.1.1
SPDLOG_COMMIT=76fb40d95455f249bd70824ecfcae7a8f0930fa3    # CT2's submodule pins
CPU_FEATURES_COMMIT=8a494eb1e158ec2050e5f699a504fbc9b896a43b
JOBS=${JOBS:-2}
PREFIX=$BUILD/prefix

extract() {  # extract GIT_DIR COMMIT DEST
  rm -rf "$3" && mkdir -p "$3"
  git --git-dir="$1" archive "$2" | tar -x -C "$3"
}

if [ ! -f "$PREFIX/lib/libdnnl.a" ]; then
  extract "$ONEDNN_GIT" "$ONEDNN_COMMIT" "$BUILD/onednn-src"
  cmake -S "$BUILD/onednn-src" -B "$BUILD/onednn-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DONEDNN_LIBRARY_TYPE=STATIC -DONEDNN_BUILD_EXAMPLES=OFF \
    -DONEDNN_BUILD_TESTS=OFF -DONEDNN_ENABLE_WORKLOAD=INFERENCE \
    -DONEDNN_ENABLE_PRIMITIVE="CONVOLUTION;REORDER" -DONEDNN_BUILD_GRAPH=OFF
  cmake --build "$BUILD/onednn-build" -j "$JOBS" --target install
fi

if [ ! -f "$PREFIX/lib/libctranslate2.so" ]; then
  extract "$CT2_GIT" "$CT2_COMMIT" "$BUILD/ct2-src"
  extract "$SPDLOG_GIT" "$SPDLOG_COMMIT" "$BUILD/ct2-src/third_party/spdlog"
  extract "$CPU_FEATURES_GIT" "$CPU_FEATURES_COMMIT" "$BUILD/ct2-src/third_party/cpu_features"
  cmake -S "$BUILD/ct2-src" -B "$BUILD/ct2-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DWITH_MKL=OFF -DWITH_DNNL=ON -DOPENMP_RUNTIME=COMP \
    -DBUILD_CLI=OFF -DDNNL_INCLUDE_DIR="$PREFIX/include" -DDNNL_LIBRARY="$PREFIX/lib/libdnnl.a" \
    -DCMAKE_INSTALL_RPATH="$PREFIX/lib"
  cmake --build "$BUILD/ct2-build" -j "$JOBS" --target install
fi

# The Python module, in place: ctranslate2/_ext*.so beside the package's Python files.
cd "$BUILD/ct2-src/python"
CTRANSLATE2_ROOT="$PREFIX" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
  LDFLAGS="-Wl,-rpath,$PREFIX/lib" /usr/bin/python3 setup.py build_ext --inplace
PYTHONPATH="$BUILD/ct2-src/python" /usr/bin/python3 -c \
  'import ctranslate2; print("ctranslate2", ctranslate2.__version__, ctranslate2.get_supported_compute_types("cpu"))'
