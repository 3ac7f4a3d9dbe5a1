/* empty_preload.c: an empty shared library for the CLI tests: `autograph run --lib` and `doctor --lib`
 * need a real, loadable library that is not the shim (and needs no GPU). */
int ag_tools_testpreload_marker;
