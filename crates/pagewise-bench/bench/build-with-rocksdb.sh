#!/usr/bin/env bash
# Builds the `pagewise` binary with every peer, RocksDB included, linking
# Debian's librocksdb instead of compiling RocksDB's C++ (hours on 2 cores).
# Usage: crates/pagewise-bench/bench/build-with-rocksdb.sh [CARGO BUILD ARGS]
#   (from the repo root, as root; the default builds the `pagewise` binary
#   with every peer; e.g. `-p pagewise-raft --example raft_bench --features
#   rocksdb` builds the Raft bench with its RocksDB store)
set -euo pipefail
apt-get install -y -qq librocksdb-dev libclang-dev clang >/dev/null
shim=${SHIM_DIR:-/var/tmp/pagewise-rocksdb-shim}
mkdir -p "$shim"
# librocksdb 7.8.3 lacks one symbol the rocksdb crate's bindings reference;
# it is only called when a WriteBufferManager is dropped, which the adapter
# never creates, so an empty definition is safe.
echo 'void rocksdb_write_buffer_manager_destroy(void *p) { (void)p; }' >"$shim/shim.c"
cc -c -fPIC "$shim/shim.c" -o "$shim/shim.o"
ar rcs "$shim/libshim.a" "$shim/shim.o"
lib=$(ls /usr/lib/x86_64-linux-gnu/librocksdb.so.* | sort -V | tail -1)
echo "INPUT($lib $shim/libshim.a)" >"$shim/librocksdb.so"
llvm=$(ls -d /usr/lib/llvm-*/lib | sort -V | tail -1)
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(-p pagewise-cli --features pagewise-bench/peers-all); fi
ROCKSDB_LIB_DIR=$shim LIBCLANG_PATH=$llvm cargo build --release "${args[@]}"
echo "built (${args[*]}) with RocksDB from $lib"
