/* A stand-in for a prebuilt libnccl.so.2 without sm_121 kernels (a pip wheel, a deb, a
 * baked-in LD_PRELOAD): same soname, answers ncclGetVersion with 2.28.9. */
int ncclGetVersion(int *version) {
  *version = 22809;
  return 0;
}
