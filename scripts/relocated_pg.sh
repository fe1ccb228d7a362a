# Sourced: relocated_pg SRC_PG_CONFIG DEST prints the pg_config of a copy of
# the PostgreSQL 15 that SRC_PG_CONFIG names, made under DEST if it is not
# there (Debian's layout: <root>/usr/lib/postgresql/15, its share and include
# directories).  Extensions built for a test (MADlib, Citus) go into the
# copy, never into the PostgreSQL it came from.
relocated_pg() {
    local src=$1 dest=$2 libroot root
    if [ ! -x "$src" ]; then
        echo "no pg_config at $src; set PG_CONFIG to a PostgreSQL 15's" >&2
        return 2
    fi
    libroot=$(dirname "$("$src" --bindir)")
    root=${libroot%/usr/lib/postgresql/15}
    if [ "$root" = "$libroot" ]; then
        echo "$src is not laid out as Debian's PostgreSQL 15" \
            "(<root>/usr/lib/postgresql/15/bin); set PG_CONFIG to one that is" >&2
        return 2
    fi
    if [ ! -x "$dest/usr/lib/postgresql/15/bin/pg_config" ]; then
        echo "== a relocated copy of $root/usr/lib/postgresql/15 in $dest" >&2
        rm -rf "$dest"
        mkdir -p "$dest/usr/lib/postgresql" "$dest/usr/share/postgresql" "$dest/usr/include"
        cp -a "$root/usr/lib/postgresql/15" "$dest/usr/lib/postgresql/"
        cp -a "$root/usr/share/postgresql/15" "$dest/usr/share/postgresql/"
        cp -a "$root/usr/include/postgresql" "$dest/usr/include/"
    fi
    echo "$dest/usr/lib/postgresql/15/bin/pg_config"
}
