#pragma once
// DL_CPU_CLONES before a function definition compiles it twice, for AVX2+FMA machines
// (x86-64-v3) and for the x86-64 baseline, and the loader picks one at start-up (GCC/Clang
// function multi-versioning). The engine stays a portable binary (Big Red II's Interlagos
// Opterons have no AVX2) while its hot own loops get 8-wide vectors where the CPU has them.
// Only for functions whose arguments are pointers and scalars: a vector type passed by value
// would change the calling convention between the clones.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DL_CPU_CLONES
#endif
