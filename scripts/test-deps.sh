#!/bin/sh
# test-deps.sh: makes sure the programs admit's tests run (scripts/test-programs.txt) are on PATH.
#
# Every program present: prints nothing and exits 0. Some missing:
#   - on Debian or Ubuntu (apt-get on PATH), installs their packages with apt-get update and
#     apt-get install -y, through sudo when not root, printing each command before it runs it;
#   - with ADMIT_NO_INSTALL=1, installs nothing: prints the install line and exits 1;
#   - on another system, prints the install line for the package manager it finds (brew, dnf, yum,
#     apk, pacman, zypper) and exits 1.
# Used by `make test` (and `make bench`) and .ci/run. POSIX sh, so that it runs before anything is
# installed.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
list=${ADMIT_TEST_PROGRAMS:-$here/test-programs.txt}
me=scripts/test-deps.sh

say() { printf '%s\n' "$*" >&2; }

# package_for SYSTEM FIELDS…: the package of a list line's fields (program, Debian package, then
# SYSTEM=PACKAGE overrides) under SYSTEM, "apt" for Debian's.
package_for() {
	for_system=$1
	pkg=$3
	shift 3
	for f in "$@"; do
		case $f in
		"$for_system"=*) pkg=${f#*=} ;;
		esac
	done
	printf '%s\n' "$pkg"
}

# The package manager of this system, its install line's command, and whether it needs root.
system=unknown
for manager in apt-get brew dnf yum apk pacman zypper; do # the first found, in this order
	if command -v "$manager" >/dev/null 2>&1; then
		system=${manager%-get} # apt-get is apt
		break
	fi
done

missing=
packages=
while read -r program debian rest; do
	case $program in
	'' | '#'*) continue ;;
	esac
	if [ -z "$debian" ]; then
		say "$me: $list: line for $program names no package"
		exit 2
	fi
	command -v "$program" >/dev/null 2>&1 && continue
	missing="$missing $program"
	# shellcheck disable=SC2086 # rest is the line's SYSTEM=PACKAGE fields
	pkg=$(package_for "$system" "$program" "$debian" $rest)
	case " $packages " in
	*" $pkg "*) ;;
	*) packages="$packages $pkg" ;;
	esac
done <"$list"

[ -z "$missing" ] && exit 0
missing=${missing# }
packages=${packages# }

sudo=
if [ "$(id -u)" != 0 ]; then
	sudo="sudo "
fi
case $system in
apt) line="${sudo}apt-get update && ${sudo}apt-get install -y $packages" ;;
brew) line="brew install $packages" ;;
dnf) line="${sudo}dnf install -y $packages" ;;
yum) line="${sudo}yum install -y $packages" ;;
apk) line="${sudo}apk add $packages" ;;
pacman) line="${sudo}pacman -S --needed $packages" ;;
zypper) line="${sudo}zypper install -y $packages" ;;
*) line="" ;;
esac

say "$me: the tests need $missing on PATH, which this machine lacks"
if [ "$system" != apt ] || [ "${ADMIT_NO_INSTALL:-}" = 1 ]; then
	if [ "$system" = apt ]; then
		say "$me: ADMIT_NO_INSTALL=1, so installing nothing; install them with:"
	elif [ -n "$line" ]; then
		say "$me: installing by itself only on Debian or Ubuntu; install them with:"
	else
		say "$me: no package manager found that this script knows; install the packages that ship them (on Debian: $packages), such as with:"
		line="apt-get install -y $packages"
	fi
	say "    $line"
	exit 1
fi

if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
	say "$me: not root, and sudo is not on PATH; install them as root with:"
	say "    apt-get update && apt-get install -y $packages"
	exit 1
fi

# run COMMAND…: prints the command, then runs it.
run() {
	say "+ $*"
	"$@"
}
# shellcheck disable=SC2086 # sudo and packages are lists of words
run ${sudo}apt-get update
# shellcheck disable=SC2086
run ${sudo}env DEBIAN_FRONTEND=noninteractive apt-get install -y $packages

for program in $missing; do
	if ! command -v "$program" >/dev/null 2>&1; then
		say "$me: $program is still not on PATH after installing $packages"
		exit 1
	fi
done
