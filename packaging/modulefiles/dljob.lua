-- dljob @VERSION@, the relocatable release: `module use <release>/modulefiles; module load dljob`.
-- The release's root is found from this file's own path, so the unpacked folder can be moved.
-- Only PATH changes: the binaries find their libraries through RPATH, and LD_LIBRARY_PATH set
-- here would leak into every program the job starts (srun, mpirun, the user's own scripts).
local root = myFileName():match("^(.*)/modulefiles/[^/]+/[^/]+$")
whatis("Name: dljob")
whatis("Version: @VERSION@")
whatis("Description: train deep networks on shared HPC clusters (dljob, dltrain)")
help([[
dljob @VERSION@: submit, track and stage deep-learning jobs; dltrain, its training engine.
Start with `dljob doctor` and `dljob sites`; the guide is in ]] .. root .. [[/share/doc/dljob.
]])
conflict("dljob")
prepend_path("PATH", pathJoin(root, "bin"))
