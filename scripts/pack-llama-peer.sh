#!/usr/bin/env bash
# pack-llama-peer.sh — runs on the dev machine (PyPI reachable): packs the llama.cpp sources of the PyPI
# llama-cpp-python sdist (its vendor/llama.cpp), trimmed to what a CUDA build of llama-batched-bench,
# llama-bench and llama-quantize plus convert_hf_to_gguf.py / gguf-py need, into .devpack/llama.cpp.tar.xz
# (git-ignored; ~5 MB) for scripts/gpu-peer.sh on the GPU machine, which has no internet.
# See ../shared/design/performance.md, "Peers on the same weights".
#   LLAMA_CPP_PYTHON_VERSION (default 0.3.36)   SDIST=path of an already downloaded sdist (skips pip download)
# Usage: scripts/pack-llama-peer.sh   → prints the pack's path and size
set -euo pipefail
cd "$(dirname "$0")/.."
VER="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
OUTF=.devpack/llama.cpp.tar.xz
tmp=$(mktemp -d /tmp/pack-llama-peer.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

sdist="${SDIST:-}"
if [[ -z "$sdist" ]]; then
  python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VER" -d "$tmp/dl"
  sdist=$(ls "$tmp"/dl/llama_cpp_python-"$VER".tar.gz)
fi
tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$VER/vendor/llama.cpp" "llama_cpp_python-$VER/CHANGELOG.md"
src="$tmp/llama_cpp_python-$VER"
L="$src/vendor/llama.cpp"
commit=$(sed -n "/^## \[$VER\]/,/^## \[/p" "$src/CHANGELOG.md" | grep -o 'llama\.cpp@[0-9a-f]*' | head -1 | cut -d@ -f2)

# Not needed for the build or the converter. Every add_subdirectory left in the CMake files either stays or is
# behind an option that gpu-peer.sh turns off (tests, examples+pocs, server: tools/ui tools/server tools/cli,
# app: LLAMA_BUILD_APP=OFF); ggml backends are only added when their GGML_<NAME> option is on.
(cd "$L" && rm -rf .git .github .devops .gemini docs models media tests examples pocs benches ci scripts app \
  tools/ui tools/server tools/cli)
(cd "$L/ggml/src" && rm -rf ggml-blas ggml-cann ggml-et ggml-hexagon ggml-hip ggml-metal ggml-musa ggml-opencl \
  ggml-openvino ggml-rpc ggml-sycl ggml-virtgpu ggml-vulkan ggml-webgpu ggml-zdnn ggml-zendnn)
# CPU backend: x86 only (the other arch dirs are only referenced for their own CMAKE_SYSTEM_PROCESSOR)
(cd "$L/ggml/src/ggml-cpu" && rm -rf spacemit kleidiai arch/arm arch/loongarch arch/powerpc arch/riscv arch/s390 arch/wasm)
find "$L" -name '__pycache__' -prune -exec rm -rf {} +
cat > "$L/PEER-VERSION" <<EOF
llama-cpp-python $VER (PyPI sdist), vendored llama.cpp ggml-org/llama.cpp@${commit:-unknown}
trimmed by ember scripts/pack-llama-peer.sh: no docs/ models/ media/ tests/ examples/ pocs/ benches/ ci/ scripts/
app/ tools/{ui,server,cli}, no ggml backends but CPU (x86) and CUDA
EOF

mkdir -p .devpack
tar -C "$src/vendor" --owner=0 --group=0 --sort=name -cf - llama.cpp | xz -9 -T2 > "$OUTF.tmp"
mv "$OUTF.tmp" "$OUTF"
echo "$OUTF: $(du -k "$OUTF" | cut -f1) KiB, $(tar -tJf "$OUTF" | wc -l) entries; $(head -1 "$L/PEER-VERSION")"
