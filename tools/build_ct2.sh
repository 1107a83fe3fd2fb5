#!/bin/bash
# Builds CTranslate2 (CPU only) and its Python module from source, for tools/bench_ct2.py and
# tools/bench_whisper.py --ct2. Not part of `make test` or `make all`: run it by hand.
#
#   tools/build_ct2.sh BUILD_DIR CT2_GIT ONEDNN_GIT|debian SPDLOG_GIT CPU_FEATURES_GIT
#
# Each *_GIT is a git directory (a clone or a bare mirror) holding the commit pinned below.
# Afterwards: PYTHONPATH=BUILD_DIR/ct2-src/python /usr/bin/python3 -c 'import ctranslate2'.
#
# Backend: oneDNN, as for CTranslate2's Linux x86-64 wheels (python/tools/
# prepare_build_environment_linux.sh: oneDNN 3.1.1, static, inference primitives only). The
# wheels also link Intel MKL, but CTranslate2 calls MKL only on Intel CPUs (src/cpu/backend.cc:
# mayiuse_mkl() is false on other vendors unless CT2_USE_MKL=1): on an AMD CPU the wheels'
# GEMMs (f32 sgemm, int8 u8s8s32) are oneDNN's, so MKL is left out (Debian's main archive has
# none). ONEDNN_GIT=debian uses Debian's libdnnl-dev 2.6.3 instead of building 3.1.1 (about an
# hour of 2 busy cores): the same GEMM entry points (dnnl_sgemm, dnnl_gemm_u8s8s32); only
# src/ops/conv1d_cpu.cc (Whisper's two convolutions) uses the C++ API that changed in 3.0, and
# is rewritten to 2.x's form (convolution_forward::desc, then its primitive_desc), same
# arguments. OpenMP: GNU's (OPENMP_RUNTIME=COMP; Debian's oneDNN uses it too). Kernels:
# CTranslate2's runtime ISA dispatch (avx512 on Zen 4).
# Needs: cmake, g++, python3-pybind11, python3-setuptools, python3-numpy, python3-yaml
# (and libdnnl-dev for ONEDNN_GIT=debian).
set -euo pipefail
if [ $# -ne 5 ]; then
  sed -n 4,8p "$0" >&2
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
HERE=$(cd "$(dirname "$0")" && pwd)

extract() {  # extract GIT_DIR COMMIT DEST
  rm -rf "$3" && mkdir -p "$3"
  git --git-dir="$1" archive "$2" | tar -x -C "$3"
}

if [ "$ONEDNN_GIT" = debian ]; then
  DNNL_INCLUDE=/usr/include
  DNNL_LIB=$(ls /usr/lib/*/libdnnl.so | head -1)
else
  DNNL_INCLUDE=$PREFIX/include
  DNNL_LIB=$PREFIX/lib/libdnnl.a
  if [ ! -f "$DNNL_LIB" ]; then
    extract "$ONEDNN_GIT" "$ONEDNN_COMMIT" "$BUILD/onednn-src"
    cmake -S "$BUILD/onednn-src" -B "$BUILD/onednn-build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$PREFIX" -DONEDNN_LIBRARY_TYPE=STATIC -DONEDNN_BUILD_EXAMPLES=OFF \
      -DONEDNN_BUILD_TESTS=OFF -DONEDNN_ENABLE_WORKLOAD=INFERENCE \
      -DONEDNN_ENABLE_PRIMITIVE="CONVOLUTION;REORDER" -DONEDNN_BUILD_GRAPH=OFF
    cmake --build "$BUILD/onednn-build" -j "$JOBS" --target install
  fi
fi

if [ ! -f "$PREFIX/lib/libctranslate2.so" ]; then
  extract "$CT2_GIT" "$CT2_COMMIT" "$BUILD/ct2-src"
  extract "$SPDLOG_GIT" "$SPDLOG_COMMIT" "$BUILD/ct2-src/third_party/spdlog"
  extract "$CPU_FEATURES_GIT" "$CPU_FEATURES_COMMIT" "$BUILD/ct2-src/third_party/cpu_features"
  if [ "$ONEDNN_GIT" = debian ]; then
    /usr/bin/python3 "$HERE/ct2_onednn2.py" "$BUILD/ct2-src/src/ops/conv1d_cpu.cc"
  fi
  cmake -S "$BUILD/ct2-src" -B "$BUILD/ct2-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DWITH_MKL=OFF -DWITH_DNNL=ON -DOPENMP_RUNTIME=COMP \
    -DBUILD_CLI=OFF -DDNNL_INCLUDE_DIR="$DNNL_INCLUDE" -DDNNL_LIBRARY="$DNNL_LIB" \
    -DCMAKE_INSTALL_RPATH="$PREFIX/lib"
  cmake --build "$BUILD/ct2-build" -j "$JOBS" --target install
fi

# The Python module, in place: ctranslate2/_ext*.so beside the package's Python files.
cd "$BUILD/ct2-src/python"
CTRANSLATE2_ROOT="$PREFIX" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
  LDFLAGS="-Wl,-rpath,$PREFIX/lib" /usr/bin/python3 setup.py build_ext --inplace
PYTHONPATH="$BUILD/ct2-src/python" /usr/bin/python3 -c \
  'import ctranslate2; print("ctranslate2", ctranslate2.__version__, ctranslate2.get_supported_compute_types("cpu"))'
