#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Gather what the GPU checks need into one folder that travels to a machine with a GPU but
# no MPI (the device tool; docs/gpu.md "Running the GPU checks"): the build tree's GPU test
# programs and libraries, MPICH's launcher, and every shared library they load that is not
# part of glibc or the GCC runtime (the machine's own, newer ones serve those).
#
#   tests/gpu/pack.sh [BUILD_DIR] [DEST]     (defaults: _build  .gpu)
#
# DEST must be ignored by git (.git/info/exclude) and is replaced. Then, on the GPU machine,
# from the repository root:  bash tests/gpu/run_device.sh DEST
set -euo pipefail
B=${1:-_build}
D=${2:-.gpu}
[ -x "$B/tests/gpu/t_gpu_coll" ] || { echo "pack.sh: $B/tests/gpu/t_gpu_coll missing (build with CUDA first)" >&2; exit 1; }
rm -rf "$D"
mkdir -p "$D/bin" "$D/lib" "$D/ucx"
cp -L "$B/tests/unit/test_cuda" "$B/bench/cuda_bench" "$B/tests/gpu/t_gpu_coll" "$D/bin/"
cp -L "$B/tests/unit/libcompmpi_fakecuda.so" "$D/bin/"
cp -L "$B/.libs/libcompmpi.so.0" "$B/libcompmpi_cuda.so" "$D/lib/"
ln -s libcompmpi.so.0 "$D/lib/libcompmpi.so"
hydra=$(readlink -f "$(command -v mpiexec.mpich)")
cp -L "$hydra" "$D/bin/mpiexec.hydra"
cp -L "$(dirname "$hydra")/hydra_pmi_proxy" "$D/bin/"
# UCX loads its transports as modules from here (cma etc.); take them all.
ucxmod=$(dirname "$(readlink -f /usr/lib/x86_64-linux-gnu/libucp.so.0)")/ucx
[ -d "$ucxmod" ] && cp -a "$ucxmod"/*.so* "$D/ucx/" 2>/dev/null || true
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|linux-vdso)\.'
for f in "$D"/bin/* "$D"/lib/*.so* "$D"/ucx/*.so*; do
    [ -f "$f" ] || continue
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [ -e "$D/lib/$name" ] || cp -L "$path" "$D/lib/$name"
done
# debug sections are most of the bytes (the travelling tree is limited to 64 MiB)
find "$D" -type f -exec strip --strip-debug {} + 2>/dev/null || true
# and MPICH's library is 40 MB of code: it travels gzipped (run_device.sh unpacks it)
find "$D" -type f -size +8M -exec gzip -9 {} +
du -sh "$D"
