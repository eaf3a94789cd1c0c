# shellcheck shell=bash
# Debian 11 (bullseye) roots for the release: the one it is built in (scripts/make-release.sh)
# and the bare one it is tested in (tests/release/release_test.sh). Sourced, not run.
#
# Why Debian 11: glibc 2.31 and GCC 10. Binaries linked there need at most the glibc they were
# built against, and bullseye is the oldest Debian the mirror still serves (docs/install.md).
# Roots are made once and kept in a cache folder; a stamp file holding the package list says
# whether a kept root is complete, so an interrupted debootstrap is started over, not trusted.

release_suite=bullseye

# The Debian mirror this machine's apt already uses (its URIs: line), else Debian's own.
release_mirror() {
    if [[ -n "${DLJOB_DEBIAN_MIRROR:-}" ]]; then
        echo "$DLJOB_DEBIAN_MIRROR"
        return
    fi
    local uri=""
    if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
        uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [[ -z "$uri" && -r /etc/apt/sources.list ]]; then
        uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

release_die() {
    echo "make-release: $*" >&2
    exit 1
}

# The mounts a root needs while commands run in it; undone by release_unmount_all.
release_mounts=()
release_mount() { # ROOT: /proc and a fresh /dev/shm
    local root=$1
    if ! mountpoint -q "$root/proc"; then
        mount -t proc proc "$root/proc"
        release_mounts+=("$root/proc")
    fi
    mkdir -p "$root/dev/shm"
    if ! mountpoint -q "$root/dev/shm"; then
        mount -t tmpfs -o mode=1777,size=2g tmpfs "$root/dev/shm"
        release_mounts+=("$root/dev/shm")
    fi
}
release_bind_ro() { # HOST_DIR ROOT TARGET: a read-only view of a host folder inside a root
    local host=$1 root=$2 target=$3
    mkdir -p "$root$target"
    if ! mountpoint -q "$root$target"; then
        mount --bind "$host" "$root$target"
        release_mounts+=("$root$target")
        mount -o remount,bind,ro "$root$target"
    fi
}
release_unmount_all() {
    local i
    for ((i = ${#release_mounts[@]} - 1; i >= 0; i--)); do
        umount -l "${release_mounts[i]}" 2>/dev/null || true
    done
    release_mounts=()
}

# Installs PACKAGES into ROOT with apt. A point release's security update may be listed before
# its files reach the pool (a 404 for libarchive-dev in 2026-11): then the package falls back to
# the version of bullseye's own point release, and the script says so.
release_apt_install() { # ROOT PACKAGES...
    local root=$1
    shift
    local apt=(chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get -q -y
               -o DPkg::Lock::Timeout=300 --no-install-recommends)
    if "${apt[@]}" install "$@" >"$root/tmp/apt.log" 2>&1; then
        return 0
    fi
    local missing
    missing=$(grep -oE '/pool/updates/[^ ]*/[^/_ ]+_[^/ ]+\.deb +404' "$root/tmp/apt.log" |
              sed -E 's|.*/([^/_]+)_[^/]+$|\1|; s| .*||' | sort -u)
    [[ -n "$missing" ]] || { tail -20 "$root/tmp/apt.log" >&2; release_die "apt-get install failed in $root"; }
    local pins=() pkg version dep
    for pkg in $missing; do
        version=$(chroot "$root" apt-cache madison "$pkg" |
                  awk -F'|' '$3 !~ /security/ {gsub(/ /, "", $2); print $2; exit}')
        [[ -n "$version" ]] || release_die "no $release_suite version of $pkg outside the security pool"
        echo "make-release: $pkg's security update is not in the pool; using $version" >&2
        pins+=("$pkg=$version")
        # Its exact-version dependencies move with it (libarchive-dev needs libarchive13 =).
        for dep in $(chroot "$root" apt-cache show "$pkg=$version" |
                     grep -oE '[a-z0-9.+-]+ \(= [^)]+\)' | awk '{print $1}'); do
            pins+=("$dep=$version")
        done
    done
    # The pinned names replace the plain ones: given both, apt takes the candidate.
    local wanted=() name
    for name in "$@"; do
        [[ " ${pins[*]} " == *" $name="* ]] || wanted+=("$name")
    done
    "${apt[@]}" --allow-downgrades install "${wanted[@]}" "${pins[@]}" >"$root/tmp/apt.log" 2>&1 || {
        tail -20 "$root/tmp/apt.log" >&2
        release_die "apt-get install failed in $root (see $root/tmp/apt.log)"
    }
}

# One debootstrap serves every root: each starts as a copy of this untouched minbase (seconds),
# not a debootstrap of its own (one to two minutes each, most of the release test's time that
# is not compiling). It is kept beside the first root made, or where DLJOB_RELEASE_MINBASE says
# (the release test shares one between the build root and the bare root).
release_minbase_dir=""
release_minbase() { # ROOT: the root about to be made
    release_minbase_dir=${DLJOB_RELEASE_MINBASE:-$(dirname "$1")/minbase}
    [[ -f "$release_minbase_dir/.dljob-minbase" ]] && return 0
    command -v debootstrap >/dev/null || release_die "debootstrap is missing (apt-get install debootstrap)"
    local mirror
    mirror=$(release_mirror)
    rm -rf --one-file-system "$release_minbase_dir"
    mkdir -p "$(dirname "$release_minbase_dir")"
    echo "make-release: debootstrap $release_suite into $release_minbase_dir (about a minute)" >&2
    debootstrap --variant=minbase "$release_suite" "$release_minbase_dir" "$mirror" \
        >"$release_minbase_dir.debootstrap.log" 2>&1 || {
        tail -20 "$release_minbase_dir.debootstrap.log" >&2
        release_die "debootstrap failed (log: $release_minbase_dir.debootstrap.log)"
    }
    local security=${mirror%/debian}/debian-security
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
        "$mirror" "$release_suite" "$mirror" "$release_suite" "$security" "$release_suite" \
        >"$release_minbase_dir/etc/apt/sources.list"
    chroot "$release_minbase_dir" env LC_ALL=C apt-get -q -o DPkg::Lock::Timeout=300 update \
        >"$release_minbase_dir.apt-update.log" 2>&1 ||
        release_die "apt-get update failed in $release_minbase_dir (log: $release_minbase_dir.apt-update.log)"
    touch "$release_minbase_dir/.dljob-minbase"
}

# Makes ROOT a bullseye minbase with PACKAGES, unless a complete one with them is there.
release_root() { # ROOT PACKAGES...
    local root=$1
    shift
    local want stamp
    want=$(printf '%s\n' "$release_suite" "$@" | sha256sum | cut -c1-16)
    stamp="$root/.dljob-root-$want"
    if [[ -f "$stamp" ]]; then
        return 0
    fi
    if [[ ! -f "$root/.dljob-debootstrapped" ]]; then
        release_minbase "$root"
        release_unmount_all
        [[ -d "$root" ]] && { umount -R "$root" 2>/dev/null || true; rm -rf --one-file-system "$root"; }
        mkdir -p "$(dirname "$root")"
        cp -a --reflink=auto "$release_minbase_dir" "$root"
        rm -f "$root/.dljob-minbase"
        touch "$root/.dljob-debootstrapped"
    fi
    chroot "$root" env LC_ALL=C apt-get -q -o DPkg::Lock::Timeout=300 update >"$root/tmp/apt-update.log" 2>&1 ||
        release_die "apt-get update failed in $root (see $root/tmp/apt-update.log)"
    if (($#)); then
        release_apt_install "$root" "$@"
    fi
    chroot "$root" apt-get -q clean
    rm -f "$root"/.dljob-root-*
    touch "$stamp"
}
