# Sourced by the diagnostic scripts and run.sh (from the repository root): lib_built, and, where $BUILD
# (default build-gpu) holds no libautograph.so yet, the library target built there; lib is its path.
# lib_built SRC DIR LOG: builds the library of the source tree SRC (this one, or an earlier version's git
# archive) in DIR, the output in LOG; prints the library's path, or fails.
lib_built() {
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    { cmake -S "$1" -B "$2" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build "$2" -j16 --target autograph; } >"$3" 2>&1 && echo "$(cd "$2/lib" && pwd)/libautograph.so"
}
BUILD=${BUILD:-build-gpu}
[ -f "$BUILD/lib/libautograph.so" ] || lib_built . "$BUILD" /tmp/shim-build.log >/dev/null ||
    { tail -30 /tmp/shim-build.log; exit 1; }
lib=$PWD/$BUILD/lib/libautograph.so
