/* A stand-in for torch's libtorch_cuda.so: needs libnccl.so.2, found through an RPATH into the
 * nvidia-nccl wheel ($ORIGIN/../../nvidia/nccl/lib, as torch 2.11's has), and calls into it. */
int ncclGetVersion(int *version);

int fake_torch_nccl_version(void) {
  int version = 0;
  ncclGetVersion(&version);
  return version;
}
