# Sourced by the GPU scripts that configure a build on the device machine, which lacks nettle-dev (the
# checkpoints' SHA-256): where its headers are missing, CMake is pointed at Debian's package unpacked in
# .ext/nettle (carried) and the loader at its library. Sets NET, the CMake arguments (empty where
# nettle-dev is installed).
NET=()
if [ ! -e /usr/include/nettle/sha2.h ]; then
  carried_nettle=$PWD/.ext/nettle/usr
  export LD_LIBRARY_PATH=$carried_nettle/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  NET=(-DNETTLE_INCLUDE_DIR=$carried_nettle/include -DNETTLE_LIBRARY=$carried_nettle/lib/x86_64-linux-gnu/libnettle.so
       "-DCMAKE_CXX_FLAGS=-isystem $carried_nettle/include")
fi
