#!/usr/bin/env bash
# Install shoe-controller on a table box (docs/operations.md, "Installing on a table box").
#
#   sudo deploy/install.sh [--table T01]... [--archive 1]...   install or upgrade
#   sudo deploy/install.sh --uninstall             remove the program (keeps configs and journals)
#
# What lands where (ROOT is / unless --root or DESTDIR says otherwise):
#   /opt/shoe-controller/                           a virtualenv holding the wheel and its dependencies
#   /usr/local/bin/shoe-controller                  symlink to the venv's command
#   /usr/local/lib/systemd/system/shoe-controller{,@,-board,-archive@}.service   replaced on every
#                                                   upgrade; local changes go in drop-ins (systemctl edit)
#   /usr/local/lib/sysusers.d/shoe-controller.conf  the service user and group
#   /etc/udev/rules.d/99-shoe-controller.rules      never overwritten (it holds your shoes' ids)
#   /etc/shoe-controller/config.yaml (or <table>.yaml per --table)   never overwritten
#   /etc/shoe-controller/archive-<name>.yaml per --archive           never overwritten
#   /var/lib/shoe-controller/<table>/signing.key    the table's signing key (per --table; without
#                                                   --table /var/lib/shoe-controller/signing.key):
#                                                   where its config's signing_key says, mode 0600
#                                                   in a 0700 directory, the service user's; made
#                                                   once, never overwritten, never printed
#
# Options:
#   --wheel FILE   install this wheel (default: build one from the source tree this script is in)
#   --root DIR     stage everything under DIR (default: $DESTDIR, else /); nothing is started,
#                  no user is created, and the tree is correct for its final location
#   --prefix DIR   the virtualenv's final path (default /opt/shoe-controller)
#   --python PY    the interpreter the venv is built on (default python3; 3.11 or newer)
#   --table T      write /etc/shoe-controller/T.yaml for shoe-controller@T (repeatable) and
#                  make the table's signing key; without it: /etc/shoe-controller/config.yaml
#                  for shoe-controller.service, and its key
#   --archive NAME write /etc/shoe-controller/archive-NAME.yaml (client_id archive-NAME) for the
#                  floor archiver shoe-controller-archive@NAME (repeatable), and install the
#                  archive extra (psycopg). An upgrade keeps the extra while any archive-*.yaml exists.
#   --uninstall    remove the venv, the symlink, the units and the sysusers file
#
# Virtualenvs are not relocatable (their scripts' #! lines and pyvenv.cfg hold
# absolute paths), so the venv is built beside its destination as
# ROOT/PREFIX.new.XXXXXXXX, its paths are rewritten to PREFIX (#! lines, activate
# scripts, pyvenv.cfg, and the paths compiled into .pyc files), and it is then
# renamed into place. An upgrade is thus a new venv swapped in by one rename,
# and a staged tree (--root) is exactly what a real install would hold: copy
# it to / on a machine with the same base interpreter (the venv's python is a
# symlink to it). pip's usual settings (PIP_INDEX_URL, PIP_FIND_LINKS,
# PIP_NO_INDEX) apply to the dependencies; the build needs setuptools>=77
# from the index when no --wheel is given.
set -euo pipefail

PROG=install.sh
die() { echo "$PROG: $*" >&2; exit 2; }
fail() { echo "$PROG: $*" >&2; exit 1; }

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${DESTDIR:-/}
PREFIX=/opt/shoe-controller
PYTHON=python3
WHEEL=
UNINSTALL=0
TABLES=()
ARCHIVES=()

while [ $# -gt 0 ]; do
  case $1 in
    --root) [ $# -ge 2 ] || die "--root needs a directory"; ROOT=$2; shift 2 ;;
    --root=*) ROOT=${1#*=}; shift ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; PREFIX=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#*=}; shift ;;
    --wheel) [ $# -ge 2 ] || die "--wheel needs a file"; WHEEL=$2; shift 2 ;;
    --wheel=*) WHEEL=${1#*=}; shift ;;
    --python) [ $# -ge 2 ] || die "--python needs an interpreter"; PYTHON=$2; shift 2 ;;
    --python=*) PYTHON=${1#*=}; shift ;;
    --table) [ $# -ge 2 ] || die "--table needs a table id"; TABLES+=("$2"); shift 2 ;;
    --table=*) TABLES+=("${1#*=}"); shift ;;
    --archive) [ $# -ge 2 ] || die "--archive needs an archiver name"; ARCHIVES+=("$2"); shift 2 ;;
    --archive=*) ARCHIVES+=("${1#*=}"); shift ;;
    --uninstall) UNINSTALL=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# Paths end up in sed expressions, #! lines and unit files: keep them plain.
plain='^/[A-Za-z0-9._/+-]*$'
[[ $ROOT =~ $plain ]] || die "--root must be an absolute path of letters, digits and . _ / + -: '$ROOT'"
[[ $PREFIX =~ $plain ]] || die "--prefix must be an absolute path of letters, digits and . _ / + -: '$PREFIX'"
PREFIX=${PREFIX%/}
[ -n "$PREFIX" ] || die "--prefix cannot be /"
R=${ROOT%/}                        # "" for the real root
for t in "${TABLES[@]}"; do
  # The config's own rule for table ids (controller/config.py): the MQTT topic level.
  [[ $t =~ ^[A-Za-z0-9_-]{1,32}$ ]] || die "--table '$t': 1-32 of A-Z a-z 0-9 _ -"
done
for a in "${ARCHIVES[@]}"; do
  # A unit instance name and part of the MQTT client id (archive-NAME).
  [[ $a =~ ^[A-Za-z0-9_-]{1,32}$ ]] || die "--archive '$a': 1-32 of A-Z a-z 0-9 _ -"
done

UNITDIR=/usr/local/lib/systemd/system
SYSUSERS=/usr/local/lib/sysusers.d/shoe-controller.conf
UDEV=/etc/udev/rules.d/99-shoe-controller.rules
CONFDIR=/etc/shoe-controller
BINLINK=/usr/local/bin/shoe-controller
UNITS=(shoe-controller.service shoe-controller@.service shoe-controller-board.service
       shoe-controller-archive@.service)

live() { [ -z "$R" ] && [ -d /run/systemd/system ]; }
[ -n "$R" ] || [ "$(id -u)" = 0 ] || die "installing into / needs root (or stage it: --root DIR)"

if [ $UNINSTALL = 1 ]; then
  if live; then
    mapfile -t running < <(systemctl list-units --all --plain --no-legend 'shoe-controller.service' \
      'shoe-controller@*.service' 'shoe-controller-board.service' 'shoe-controller-archive@*.service' |
      awk '{print $1}')
    mapfile -t enabled < <(cd /etc/systemd/system && find . -path './*.wants/shoe-controller*.service' \
      -printf '%f\n' 2>/dev/null | sort -u)
    [ ${#enabled[@]} -eq 0 ] || systemctl disable "${enabled[@]}"
    [ ${#running[@]} -eq 0 ] || systemctl stop "${running[@]}"
  fi
  rm -rf "$R$PREFIX" "$R$PREFIX".new.*
  for u in "${UNITS[@]}"; do rm -f "$R$UNITDIR/$u"; done
  rm -f "$R$SYSUSERS"
  if [ -L "$R$BINLINK" ] && [ "$(readlink "$R$BINLINK")" = "$PREFIX/bin/shoe-controller" ]; then
    rm -f "$R$BINLINK"
  fi
  if live; then systemctl daemon-reload; fi
  echo "removed $PREFIX, the units, $SYSUSERS and $BINLINK"
  echo "kept (remove by hand when no longer needed): $CONFDIR, $UDEV,"
  echo "  /var/lib/shoe-controller (the journals), and the user and group shoe-controller"
  exit 0
fi

for f in "${UNITS[@]/#/systemd/}" systemd/shoe-controller.sysusers systemd/99-shoe-controller.rules \
         examples/config.yaml examples/archive.yaml; do
  [ -f "$SRC/$f" ] || fail "$SRC/$f is missing: run this script from a source tree or an unpacked sdist"
done
command -v "$PYTHON" >/dev/null || fail "no interpreter '$PYTHON' (Python 3.11 or newer; --python)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
  fail "$PYTHON is $("$PYTHON" --version 2>&1); shoe-controller needs 3.11 or newer (--python)"
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null ||
  fail "$PYTHON cannot create a virtualenv: install python3-venv (apt-get install python3-venv)"
if [ -n "$WHEEL" ]; then
  [ -f "$WHEEL" ] || die "--wheel $WHEEL: no such file"
  WHEEL=$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")
fi

TMP=$(mktemp -d)
NEW=
cleanup() { rm -rf "$TMP" ${NEW:+"$NEW"}; }
trap cleanup EXIT

# 1. The venv, built beside its destination (same filesystem: one rename
#    swaps it in). A random suffix: the path is searched for below, and must
#    not be a string the packages could contain (the README names the prefix).
mkdir -p "$(dirname "$R$PREFIX")"
rm -rf "$R$PREFIX".new.*             # left by an interrupted run
NEW=$(mktemp -d "$R$PREFIX.new.XXXXXXXX")
chmod 0755 "$NEW"
"$PYTHON" -m venv "$NEW"
if [ -z "$WHEEL" ]; then
  # Build from a clean copy of the sources, so nothing stale in the checkout
  # (build/, egg-info, __pycache__) can reach the wheel.
  mkdir "$TMP/src"
  (cd "$SRC" && tar cf - --exclude=__pycache__ --exclude='*.py[cod]' \
     pyproject.toml README.md controller drivers firmware_protocols) | (cd "$TMP/src" && tar xf -)
  "$NEW/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$TMP/dist" "$TMP/src"
  WHEEL=$(ls "$TMP"/dist/*.whl)
fi
# The archive extra (psycopg, with its own libpq) only where an archiver runs:
# asked for now, or configured by an earlier install (an upgrade keeps it).
EXTRA=
if [ ${#ARCHIVES[@]} -gt 0 ] || compgen -G "$R$CONFDIR/archive-*.yaml" >/dev/null; then EXTRA="[archive]"; fi
PIP_ROOT_USER_ACTION=ignore "$NEW/bin/python" -m pip install -q --disable-pip-version-check --no-compile \
  "$WHEEL$EXTRA"

# 2. Point it at its final path.
mapfile -t texts < <(grep -rlF --binary-files=without-match "$NEW" "$NEW/bin" "$NEW/pyvenv.cfg" || true)
[ ${#texts[@]} -eq 0 ] || sed -i "s|${NEW//./\\.}|$PREFIX|g" "${texts[@]}"
"$NEW/bin/python" -m compileall -q -f -j 0 -s "$NEW" -p "$PREFIX" "$NEW/lib" >/dev/null
if left=$(grep -rlF "$NEW" "$NEW"); then
  fail "files still name the build path $NEW: $left"
fi

# 3. Check it before it replaces anything: the configs the units load
#    (config.yaml, and <table>.yaml of every enabled shoe-controller@<table>)
#    must pass the new version's check-config, or the service would not
#    start again after the upgrade.
checks=()
[ ! -e "$R$CONFDIR/config.yaml" ] || checks+=("$R$CONFDIR/config.yaml")
for link in "$R"/etc/systemd/system/*.wants/shoe-controller@*.service; do
  [ -e "$link" ] || [ -L "$link" ] || continue
  instance=${link##*/shoe-controller@}
  instance=${instance%.service}
  [ ! -e "$R$CONFDIR/$instance.yaml" ] || checks+=("$R$CONFDIR/$instance.yaml")
done
for link in "$R"/etc/systemd/system/*.wants/shoe-controller-archive@*.service; do
  [ -e "$link" ] || [ -L "$link" ] || continue
  instance=${link##*/shoe-controller-archive@}
  instance=${instance%.service}
  [ ! -e "$R$CONFDIR/archive-$instance.yaml" ] || checks+=("$R$CONFDIR/archive-$instance.yaml")
done
for cfg in "${checks[@]}"; do
  "$NEW/bin/python" -m controller.cli check-config "$cfg" >/dev/null ||
    fail "the new version refuses $cfg (above); nothing was changed"
done

# 4. Swap it in.
if [ -e "$R$PREFIX" ]; then
  rm -rf "$R$PREFIX.old"
  mv "$R$PREFIX" "$R$PREFIX.old"
fi
mv "$NEW" "$R$PREFIX"
rm -rf "$R$PREFIX.old"
install -d -m 0755 "$R/usr/local/bin"
if [ -L "$R$BINLINK" ] || [ ! -e "$R$BINLINK" ]; then
  ln -sfn "$PREFIX/bin/shoe-controller" "$R$BINLINK"
else
  echo "$PROG: $BINLINK exists and is not a symlink: left alone" >&2
fi

# 5. Units, user, udev rule, config.
install -d -m 0755 "$R$UNITDIR" "$(dirname "$R$SYSUSERS")" "$(dirname "$R$UDEV")"
for u in "${UNITS[@]}"; do
  sed "s|/opt/shoe-controller/bin/shoe-controller|$PREFIX/bin/shoe-controller|" "$SRC/systemd/$u" >"$TMP/$u"
  install -m 0644 "$TMP/$u" "$R$UNITDIR/$u"
done
install -m 0644 "$SRC/systemd/shoe-controller.sysusers" "$R$SYSUSERS"
if [ -e "$R$UDEV" ]; then
  echo "kept $UDEV"
else
  install -m 0644 "$SRC/systemd/99-shoe-controller.rules" "$R$UDEV"
fi
install -d -m 0755 "$R$CONFDIR"
written=()
if [ ${#TABLES[@]} -eq 0 ]; then names=(config); else names=("${TABLES[@]}"); fi
for name in "${names[@]}"; do
  cfg=$CONFDIR/$name.yaml
  if [ -e "$R$cfg" ]; then
    echo "kept $cfg"
    continue
  fi
  table=$name
  state=/var/lib/shoe-controller/$name   # the unit's StateDirectory (%S/shoe-controller/%i)
  [ "$name" = config ] && table=T01 && state=/var/lib/shoe-controller
  # The state paths absolute, as the unit lays them out: the board, history
  # and verify read the journal at the same path from any directory.
  sed -e "s|^table: T01 |table: $table |" -e "s|client_id: shoe-T01 |client_id: shoe-$table |" \
    -e "s|^journal: ./var/journal.sqlite3 |journal: $state/journal.sqlite3 |" \
    -e "s|^  jsonl: ./var/events.jsonl |  jsonl: $state/events.jsonl |" \
    "$SRC/examples/config.yaml" >"$TMP/$name.yaml"
  install -m 0644 "$TMP/$name.yaml" "$R$cfg"
  "$R$PREFIX/bin/python" -m controller.cli check-config "$R$cfg" >/dev/null
  written+=("$cfg")
done
for name in "${ARCHIVES[@]}"; do
  cfg=$CONFDIR/archive-$name.yaml
  if [ -e "$R$cfg" ]; then
    echo "kept $cfg"
    continue
  fi
  sed -e "s|^  client_id: archive-1 |  client_id: archive-$name |" "$SRC/examples/archive.yaml" >"$TMP/archive-$name.yaml"
  grep -q "^  client_id: archive-$name " "$TMP/archive-$name.yaml" ||
    fail "examples/archive.yaml: no client_id line to set"
  install -m 0644 "$TMP/archive-$name.yaml" "$R$cfg"
  "$R$PREFIX/bin/python" -m controller.cli check-config "$R$cfg" >/dev/null
  written+=("$cfg")
done

version=$("$R$PREFIX/bin/python" -c 'import controller; print(controller.__version__)')
echo "installed shoe-controller $version in ${R:-}$PREFIX"
if live; then
  systemd-sysusers "$SYSUSERS"
  systemctl daemon-reload
  if command -v udevadm >/dev/null; then udevadm control --reload-rules; fi
fi

# 6. Each table's signing key, where its config (written or kept) says, made
#    by the new version's keygen: mode 0600 in a 0700 directory, created
#    exclusively (an existing key is never overwritten), owned by the
#    service user on a live install. Only its key id and public key are
#    printed; the key itself is in no unit, config or log.
for name in "${names[@]}"; do
  cfg=$CONFDIR/$name.yaml
  key=$("$R$PREFIX/bin/python" -c 'import sys
from controller.config import load_config
c = load_config(sys.argv[1])
print(c.signing_key_path() if c.signing else "")' "$R$cfg") || fail "$cfg: cannot read its signing key's path"
  if [ -z "$key" ]; then
    echo "$cfg: signing is off: no key made"
    continue
  fi
  case $key in
    /*) ;;
    *) echo "$cfg: signing key $key is a relative path: the daemon makes it at its first start"; continue ;;
  esac
  if [ -e "$R$key" ] || [ -L "$R$key" ]; then
    echo "kept $key"
    continue
  fi
  install -d -m 0700 "$R$(dirname "$key")"
  made=$(umask 077 && "$R$PREFIX/bin/python" -m controller.cli keygen --key "$R$key") ||
    fail "$cfg: cannot make the signing key $key"
  if live; then chown shoe-controller:shoe-controller "$R$(dirname "$key")" "$R$key"; fi
  kid=${made#*key_id }
  echo "made the signing key $key (mode 0600): key_id ${kid%% *}"
done
if [ -n "$R" ]; then
  echo "staged under $R: nothing started, no user created"
  exit 0
fi
for cfg in "${written[@]}"; do
  case $cfg in
    */archive-*.yaml) echo "wrote $cfg: set broker and dsn (secrets in files: see the unit)" ;;
    *) echo "wrote $cfg: set device.port (and outputs) for this table" ;;
  esac
done
if [ ${#TABLES[@]} -eq 0 ]; then
  unit=shoe-controller.service
  cfgs=$CONFDIR/config.yaml
else
  unit="shoe-controller@${TABLES[0]}.service"
  cfgs=$CONFDIR/${TABLES[0]}.yaml
fi
cat <<EOF
next:
  shoe-controller check-config $cfgs
  systemctl enable --now $unit
  journalctl -u $unit -f
the table's signing key (made above; mode 0600, the service user's): its public key, to pin
in the archive's signing.keys:
  shoe-controller keygen --public -c $cfgs
an upgrade takes effect at the next restart (between shoes): systemctl restart 'shoe-controller*'
EOF
for name in "${ARCHIVES[@]}"; do
  cat <<EOF
the floor archiver $name (it applies the schema's migrations as it starts):
  shoe-controller check-config $CONFDIR/archive-$name.yaml
  systemctl enable --now shoe-controller-archive@$name.service
EOF
done
