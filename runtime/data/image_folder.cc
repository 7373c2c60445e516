#include "runtime/data/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "runtime/thread_pool.h"

namespace ddp {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Sorted entry names of `dir` (not . and ..), split into directories and
// files (links followed, as os.walk(followlinks=True) does).
void ListSorted(const std::string& dir, std::vector<std::string>* dirs, std::vector<std::string>* files) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (dirs) dirs->push_back(name);
    } else if (S_ISREG(st.st_mode) && files) {
      files->push_back(name);
    }
  }
}

bool HasImageExtension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* ext : {".jpg", ".jpeg", ".png"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() > n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// The image files under `dir`, at any depth, in sorted order (os.walk's,
// which torchvision follows: a folder's files, then its subfolders).
void CollectImages(const std::string& dir, std::vector<std::string>* out) {
  std::vector<std::string> dirs, files;
  ListSorted(dir, &dirs, &files);
  for (const std::string& f : files) {
    if (HasImageExtension(f)) out->push_back(dir + "/" + f);
  }
  for (const std::string& d : dirs) CollectImages(dir + "/" + d, out);
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open: " + std::string(std::strerror(errno)));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Internal("cannot read: " + std::string(std::strerror(errno)));
  return bytes.str();
}

// A run of files that all fail is not a few corrupt files but bad data.
constexpr int64_t kMaxConsecutiveFailures = 64;

}  // namespace

struct ImageFolderDataset::Shared {
  explicit Shared(int threads) : pool(threads) {}
  ThreadPool pool;
  std::mutex mu;
  std::set<int64_t> warned;
};

ImageFolderDataset::ImageFolderDataset(std::string flag, std::string dir, ImageFolderOptions options)
    : flag_(std::move(flag)), dir_(std::move(dir)), options_(std::move(options)),
      shared_(std::make_unique<Shared>(std::max(1, options_.loader_threads))) {}

ImageFolderDataset::~ImageFolderDataset() = default;

StatusOr<std::unique_ptr<ImageFolderDataset>> OpenImageFolder(const std::string& flag, const std::string& dir,
                                                               const ImageFolderOptions& options) {
  const std::string where = flag + " imagefolder:" + dir;
  if (!IsDirectory(dir)) return NotFound(where + ": no such directory");
  std::vector<std::string> classes;
  ListSorted(dir, &classes, nullptr);
  if (classes.empty()) {
    return InvalidArgument(where + ": holds no class folders (one folder of .jpg, .jpeg or .png images per class)");
  }
  if (!options.expected_classes.empty() && classes != options.expected_classes) {
    size_t i = 0;
    while (i < classes.size() && i < options.expected_classes.size() && classes[i] == options.expected_classes[i]) ++i;
    const std::string mine = i < classes.size() ? "'" + classes[i] + "'" : "none";
    const std::string theirs = i < options.expected_classes.size() ? "'" + options.expected_classes[i] + "'" : "none";
    return InvalidArgument(where + ": class " + std::to_string(i) + " is " + mine + ", the training data's is " +
                           theirs + " (" + std::to_string(classes.size()) + " classes against " +
                           std::to_string(options.expected_classes.size()) + ")");
  }
  std::unique_ptr<ImageFolderDataset> data(new ImageFolderDataset(flag, dir, options));
  data->classes_ = classes;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    CollectImages(dir + "/" + classes[c], &files);
    if (files.empty()) {
      return InvalidArgument(where + ": class folder " + dir + "/" + classes[c] +
                             " holds no .jpg, .jpeg or .png files");
    }
    for (std::string& f : files) data->samples_.push_back({std::move(f), static_cast<int64_t>(c)});
  }
  return data;
}

StatusOr<int64_t> ImageFolderDataset::Load(int64_t index, int64_t epoch, float* chw) const {
  const Sample& sample = samples_[index];
  StatusOr<std::string> bytes = ReadFile(sample.path);
  if (!bytes.ok()) return Status(bytes.status().code(), sample.path + ": " + bytes.status().message());
  StatusOr<ImageInfo> info = ReadImageInfo(*bytes);
  if (!info.ok()) return Status(info.status().code(), sample.path + ": " + info.status().message());
  const int size = static_cast<int>(options_.image_size);
  ImagePlan plan;
  if (options_.train) {
    SampleRng rng(options_.seed, kAugmentStream, epoch, index);
    plan = TrainPlan(info->width, info->height, size, options_.augment, rng);
  } else {
    plan = EvalPlan(info->width, info->height, size);
  }
  StatusOr<DecodedRegion> decoded = DecodeImageRegion(*bytes, plan.decode, plan.min_width, plan.min_height);
  if (!decoded.ok()) return Status(decoded.status().code(), sample.path + ": " + decoded.status().message());
  ResampleNormalized(*decoded, plan, info->width, info->height, chw);
  return sample.label;
}

StatusOr<int64_t> ImageFolderDataset::LoadOrStandIn(int64_t wanted, int64_t epoch, float* chw,
                                                    int64_t* replaced) const {
  *replaced = 0;
  for (int64_t tries = 0;; ++tries) {
    const int64_t index = (wanted + tries) % size();
    StatusOr<int64_t> label = Load(index, epoch, chw);
    if (label.ok()) {
      *replaced = tries > 0 ? 1 : 0;
      return label;
    }
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->warned.insert(index).second) {
        std::fprintf(stderr, "ddp_train: warning: %s imagefolder:%s: skipping %s\n", flag_.c_str(), dir_.c_str(),
                     label.status().message().c_str());
      }
    }
    if (tries + 1 >= std::min(kMaxConsecutiveFailures, size())) {
      return InvalidArgument(flag_ + " imagefolder:" + dir_ + ": " + std::to_string(tries + 1) +
                             " files in a row do not decode, from " + samples_[wanted].path +
                             "; the data looks corrupt (last: " + label.status().message() + ")");
    }
  }
}

int64_t ImageFolderDataset::Fill(const int64_t* indices, int64_t count, int64_t epoch, Tensor& images,
                                 Tensor& labels) const {
  const int64_t per_sample = 3 * options_.image_size * options_.image_size;
  CHECK(images.dtype() == DType::kF32 && images.numel() == count * per_sample) << "imagefolder batch "
                                                                               << images.DebugString();
  CHECK(labels.dtype() == DType::kI64 && labels.numel() == count) << "imagefolder labels " << labels.DebugString();
  std::vector<int64_t> replaced(count, 0);
  shared_->pool.ParallelFor(count, [&](int64_t b) {
    CHECK(indices[b] >= 0 && indices[b] < size()) << "sample " << indices[b] << " of " << size();
    StatusOr<int64_t> label = LoadOrStandIn(indices[b], epoch, images.data<float>() + b * per_sample, &replaced[b]);
    // Nothing here can go on: the exception ends the job with its one line.
    if (!label.ok()) throw InputError(label.status().message());
    labels.data<int64_t>()[b] = *label;
  });
  int64_t total = 0;
  for (int64_t r : replaced) total += r;
  return total;
}

Status ImageFolderDataset::Probe() const {
  constexpr int64_t kProbes = 8;
  std::vector<float> chw(static_cast<size_t>(3 * options_.image_size * options_.image_size));
  for (int64_t i = 0; i < std::min(kProbes, size()); ++i) {
    int64_t replaced = 0;
    RETURN_IF_ERROR(LoadOrStandIn(i * size() / std::min(kProbes, size()), /*epoch=*/0, chw.data(), &replaced).status());
  }
  return Status::Ok();
}

}  // namespace ddp
