// wasm-opt's options for every shipped module (scripts/build.mjs), and for the named copy the
// per-function account optimizes the same way (scripts/size-account.mjs).
export const OPT = [
  '-Oz',
  // Lets wasm-opt fold a pointer's constant offset into its load or store (2 KiB gzip). Sound
  // because nothing lives in the low 1 KiB: rustc links the stack first, so that is the far
  // end of the 1 MiB stack, and a folded access differs only by trapping where the unfolded
  // one would have wrapped around to it.
  '--low-memory-unused',
  // Inline a function with one caller only when it is tiny. Binaryen's default inlines every
  // such function whatever its size, which made the module 11.5 KB gzip larger (243,025 ->
  // 231,659 bytes at 20) and left the split nothing to cut in the engine's big functions: a
  // rare arm inlined into a common function stays with it in cairn.wasm.
  '--one-caller-inline-max-function-size', '20',
  '--enable-bulk-memory', '--enable-sign-ext', '--enable-nontrapping-float-to-int',
  '--enable-mutable-globals', '--enable-reference-types', '--enable-multivalue', '--enable-simd',
];
