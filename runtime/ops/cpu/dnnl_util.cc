#include "runtime/ops/cpu/dnnl_util.h"

#include <glog/logging.h>

namespace ddp::cpu {

dnnl::engine& DnnlEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& DnnlStream() {
  static dnnl::stream* stream = new dnnl::stream(DnnlEngine());
  return *stream;
}

PrimitiveCache& GetPrimitiveCache() {
  static PrimitiveCache* cache = new PrimitiveCache();
  return *cache;
}

void DnnlCheck(const char* what, const std::function<void()>& call) {
  try {
    call();
  } catch (const dnnl::error& e) {
    LOG(FATAL) << "oneDNN " << what << " failed: " << e.what() << " (status " << e.status << ")";
  }
}

dnnl::memory::data_type DnnlType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    default: LOG(FATAL) << "oneDNN ops take f32 or bf16 tensors, not " << DTypeName(dtype);
  }
}

dnnl::memory UserMemory(const Tensor& t, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  return dnnl::memory({dims, DnnlType(t.dtype()), tag}, DnnlEngine(), t.raw_data());
}

bool CpuHasNativeBf16() {
  // ISA values are bit sets, each containing the ones it extends (so
  // avx2_vnni, numerically larger, lacks bf16).
  const unsigned bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

void ReserveLayoutScratch(ExecutionContext& ctx, int slot, const dnnl::memory::desc& user,
                          const dnnl::memory::desc& wanted) {
  if (user != wanted) ctx.Scratch(slot, static_cast<int64_t>(wanted.get_size()));
}

dnnl::memory ToPrimitiveLayout(ExecutionContext& ctx, int slot, dnnl::memory user,
                               const dnnl::memory::desc& wanted) {
  if (user.get_desc() == wanted) return user;
  Tensor buffer = ctx.Scratch(slot, static_cast<int64_t>(wanted.get_size()));
  dnnl::memory converted(wanted, DnnlEngine(), buffer.raw_data());
  DnnlCheck("reorder", [&] { dnnl::reorder(user, converted).execute(DnnlStream(), user, converted); });
  return converted;
}

dnnl::memory OutputInPrimitiveLayout(ExecutionContext& ctx, int slot, const dnnl::memory& user,
                                     const dnnl::memory::desc& wanted) {
  if (user.get_desc() == wanted) return user;
  Tensor buffer = ctx.Scratch(slot, static_cast<int64_t>(wanted.get_size()));
  return dnnl::memory(wanted, DnnlEngine(), buffer.raw_data());
}

void FromPrimitiveLayout(dnnl::memory produced, dnnl::memory user) {
  if (produced.get_data_handle() == user.get_data_handle()) return;
  DnnlCheck("reorder", [&] { dnnl::reorder(produced, user).execute(DnnlStream(), produced, user); });
}

void Execute(const char* what, const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args,
             const dnnl::memory& produced, const dnnl::memory& user) {
  DnnlCheck(what, [&] {
    primitive.execute(DnnlStream(), args);
    if (produced) FromPrimitiveLayout(produced, user);
    DnnlStream().wait();
  });
}

}  // namespace ddp::cpu
