# Sourced by the diagnostic scripts (from the repository root): makes sure $BUILD (default build-gpu)
# holds libautograph.so, building the library target there if not, and sets lib to its path.
BUILD=${BUILD:-build-gpu}
[ -f "$BUILD/lib/libautograph.so" ] || {
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    { cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build "$BUILD" -j16 --target autograph; } >/tmp/shim-build.log 2>&1 ||
      { tail -30 /tmp/shim-build.log; exit 1; }
}
lib=$PWD/$BUILD/lib/libautograph.so
