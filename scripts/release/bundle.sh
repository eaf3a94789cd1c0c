#!/usr/bin/env bash
# shellcheck disable=SC2016 # '$ORIGIN' is for the dynamic loader, not the shell
# Makes an installed prefix relocatable: copies into PREFIX/lib every shared library that
# bin/dljob, bin/dltrain, libcurl (which dljob opens at run time) and the plugins in
# PREFIX/lib/dljob need, except glibc's own and the site's (GPU driver, CUDA libraries, cuDNN,
# NCCL, MPI); points every RPATH at $ORIGIN; adds the module files and the bundled libraries'
# licences; and refuses a tree that needs a newer glibc than FLOOR or names a build path.
#
#   scripts/release/bundle.sh PREFIX VERSION SOURCE_DIR [FLOOR]
#
# Runs inside the Debian 11 build root (scripts/make-release.sh), where readelf, objdump,
# patchelf and ldconfig describe the libraries the binaries were linked against.
set -euo pipefail
prefix=${1:?usage: bundle.sh PREFIX VERSION SOURCE_DIR [FLOOR]}
version=${2:?usage: bundle.sh PREFIX VERSION SOURCE_DIR [FLOOR]}
source_dir=${3:?usage: bundle.sh PREFIX VERSION SOURCE_DIR [FLOOR]}
floor=${4:-2.31}
lib=$prefix/lib
die() {
    echo "bundle: $*" >&2
    exit 1
}

# glibc itself: its parts share private interfaces with the host's ld.so and must be the
# host's. The site's: the GPU driver must match the kernel module, and CUDA, cuDNN, NCCL and MPI
# come from the site's modules, matched to its GPUs, network and launcher.
is_glibc() {
    [[ "$1" =~ ^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libnsl\.so\.1|libBrokenLocale\.so\.1|libthread_db\.so\.1|libnss_.*)$ ]]
}
is_site() {
    [[ "$1" =~ ^(libcuda\.so|libnvidia-|libcudart\.so|libcublas|libcublasLt|libcudnn|libnccl|libmpi|libmpich|libopen-rte|libopen-pal|libpmi|libpmix|libfabric|libucp|libucs) ]]
}

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
ldcache=$(ldconfig -p)
resolve() { awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}' <<<"$ldcache"; }

# Breadth-first over DT_NEEDED, starting from what runs or is opened.
curl=$(resolve libcurl.so.4)
[[ -n "$curl" ]] || die "libcurl.so.4 is not installed in the build root"
mkdir -p "$lib"
cp -L "$curl" "$lib/libcurl.so.4"
queue=("$prefix"/bin/* "$lib/libcurl.so.4")
for plugin in "$lib"/dljob/*.so; do
    [[ -e "$plugin" ]] && queue+=("$plugin")
done
declare -A bundled=([libcurl.so.4]="$curl")
declare -A site_needed=()
while ((${#queue[@]})); do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    for name in $(needed "$file"); do
        is_glibc "$name" && continue
        if is_site "$name"; then
            site_needed[$name]+=" $(basename "$file")"
            continue
        fi
        [[ -n "${bundled[$name]:-}" ]] && continue
        path=$(resolve "$name")
        [[ -n "$path" ]] || die "$name (needed by $(basename "$file")) is not in the build root's library cache"
        cp -L "$path" "$lib/$name"
        chmod 0755 "$lib/$name"
        bundled[$name]=$path
        queue+=("$lib/$name")
    done
done

# The MPICH ABI (MPICH 3.1+, Intel MPI 5+, Cray MPICH) is one, but its library is libmpich.so.12
# on Debian and libmpi.so.12 upstream and in Intel's and Cray's ABI modules: the same plugin,
# renamed, is dltrain's generic "mpi" flavour, which it tries last (engine/src/parallel/communicator.cpp).
if [[ -f "$lib/dljob/libdltrain-mpi-mpich.so" && ! -e "$lib/dljob/libdltrain-mpi-mpi.so" ]]; then
    cp "$lib/dljob/libdltrain-mpi-mpich.so" "$lib/dljob/libdltrain-mpi-mpi.so"
    patchelf --replace-needed libmpich.so.12 libmpi.so.12 "$lib/dljob/libdltrain-mpi-mpi.so"
    site_needed[libmpi.so.12]+=" libdltrain-mpi-mpi.so"
fi

# DT_RPATH (--force-rpath), not RUNPATH: RPATH is searched before LD_LIBRARY_PATH, so a site
# module's older libstdc++ or libcurl on LD_LIBRARY_PATH cannot replace the bundled ones.
for exe in "$prefix"/bin/*; do
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$exe"
done
for so in "$lib"/*.so*; do
    patchelf --force-rpath --set-rpath '$ORIGIN' "$so"
done
for plugin in "$lib"/dljob/*.so; do
    [[ -e "$plugin" ]] && patchelf --force-rpath --set-rpath '$ORIGIN/..' "$plugin"
done

# The package that installed FILE (merged /usr: dpkg may know it under /lib).
package_of() {
    local candidate
    for candidate in "$1" "${1#/usr}"; do
        dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
    return 0
}

# Licences of what is bundled, by Debian package, as Debian records them.
third_party=$prefix/share/doc/dljob/third-party
mkdir -p "$third_party"
{
    echo "Libraries bundled in lib/, with the Debian 11 package each was copied from."
    echo "Each package's licence is in the file of the same name beside this one."
    echo
} >"$third_party/README"
for name in $(printf '%s\n' "${!bundled[@]}" | sort); do
    real=$(readlink -f "${bundled[$name]}")
    package=$(package_of "$real")
    [[ -n "$package" ]] || die "cannot tell which package ships $real (licence unknown)"
    printf '%-32s %s\n' "$name" "$package" >>"$third_party/README"
    cp "/usr/share/doc/$package/copyright" "$third_party/$package" 2>/dev/null ||
        die "$package has no copyright file"
done

# Module files: bin/ on PATH, nothing else of the user's environment changed.
mkdir -p "$prefix/modulefiles/dljob"
sed "s/@VERSION@/$version/g" "$source_dir/packaging/modulefiles/dljob.lua" \
    >"$prefix/modulefiles/dljob/$version.lua"
sed "s/@VERSION@/$version/g" "$source_dir/packaging/modulefiles/dljob.tcl" \
    >"$prefix/modulefiles/dljob/$version"

# The checks a user's machine would otherwise make for us, later and less clearly.
elves=()
while IFS= read -r -d '' f; do
    [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] && elves+=("$f")
done < <(find "$prefix" -type f -print0)
highest=0
for f in "${elves[@]}"; do
    while read -r v; do
        if [[ "$(printf '%s\n%s\n' "$floor" "$v" | sort -V | tail -1)" != "$floor" ]]; then
            objdump -T "$f" | grep -F "GLIBC_$v" | awk '{print "  " $NF}' | sed 's/^/'"$(basename "$f")"':/' >&2
            die "$(basename "$f") needs GLIBC_$v, above the release's floor $floor"
        fi
        highest=$(printf '%s\n%s\n' "$highest" "$v" | sort -V | tail -1)
    done < <(objdump -T "$f" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -uV)
    while read -r entry; do
        [[ "$entry" == '$ORIGIN'* ]] || die "$(basename "$f") has a search path outside the tree: $entry"
    done < <(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' | tr ':' '\n')
done
for f in "${elves[@]}"; do
    if grep -qaE '/work/(build|stage)|/src/(src|engine)/' "$f"; then
        die "$(basename "$f") names a path of the build machine: $(grep -aoE '/work/(build|stage)[^ ]*|/src/(src|engine)/[^ ]*' "$f" | head -3 | tr '\n' ' ')"
    fi
done
echo "bundle: ${#bundled[@]} libraries in lib/, ${#elves[@]} ELF files, highest glibc symbol version $highest (floor $floor)"
for name in $(printf '%s\n' "${!site_needed[@]}" | sort); do
    echo "bundle: from the site at run time: $name (for${site_needed[$name]})"
done
