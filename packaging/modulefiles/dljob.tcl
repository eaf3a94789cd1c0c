#%Module1.0
## dljob @VERSION@, the relocatable release: `module use <release>/modulefiles; module load dljob`.
## The release's root is found from this file's own path, so the unpacked folder can be moved.
## Only PATH changes: the binaries find their libraries through RPATH.
## For Environment Modules 3.2, 4.x and 5.x; Lmod reads the .lua file beside this one.
set root [file dirname [file dirname [file dirname [file normalize $ModulesCurrentModulefile]]]]
proc ModulesHelp { } {
    puts stderr "dljob @VERSION@: submit, track and stage deep-learning jobs; dltrain, its engine."
}
module-whatis "dljob @VERSION@: train deep networks on shared HPC clusters"
conflict dljob
prepend-path PATH $root/bin
