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

dnnl::memory UserMemory(const Tensor& t, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  CHECK(t.dtype() == DType::kF32) << "oneDNN ops take f32 tensors, got " << t.DebugString();
  return dnnl::memory({dims, dnnl::memory::data_type::f32, tag}, DnnlEngine(), t.raw_data());
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

}  // namespace ddp::cpu
