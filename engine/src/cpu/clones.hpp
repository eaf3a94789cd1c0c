#pragma once
// DL_CPU_CLONES before a function definition compiles it three times, for AVX-512 machines
// (x86-64-v4), for AVX2+FMA machines (x86-64-v3) and for the x86-64 baseline, and the loader
// picks one at start-up (GCC/Clang function multi-versioning). The engine stays a portable binary
// (Big Red II's Interlagos Opterons have no AVX2) while its hot own loops get 8-wide vectors where
// the CPU has them, and on AVX-512 also its 32 vector registers: the 6x6 Winograd tiles and the
// pooling windows then spill less (cifar10_quick's step took 10-15% less CPU than with the v3
// clone alone). GCC contracts a * b + c into an FMA where the target has one, so the baseline
// clone can round differently in the last bits from the others (and, in principle, v4 from v3):
// a run is repeatable on one machine, not bit-identical across CPU generations.
// Only for functions whose arguments are pointers and scalars: a vector type passed by value
// would change the calling convention between the clones.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DL_CPU_CLONES
#endif
