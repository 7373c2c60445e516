// imagefolder:DIR: the scan (classes, order, extensions), each refusal
// naming its path, batches the same whatever the loader threads, crops
// keyed by epoch, evaluation deterministic, and a corrupt file replaced by
// the next sample that decodes, counted and named once.
#include "runtime/data/image_folder.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/data/image_dataset.h"
#include "runtime/data/image_encode.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

std::string TempDir(const std::string& name) {
  const std::string path = testing::TempPath(name);
  std::system(("rm -rf '" + path + "' && mkdir -p '" + path + "'").c_str());
  return path;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A JPEG of one flat colour with a little texture.
std::string ColourJpeg(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < rgb.size(); i += 3) {
    const int t = static_cast<int>((i / 3) % 9);
    rgb[i] = static_cast<uint8_t>(std::min(255, r + t));
    rgb[i + 1] = static_cast<uint8_t>(std::min(255, g + t));
    rgb[i + 2] = static_cast<uint8_t>(std::min(255, b + t));
  }
  return EncodeJpeg(rgb.data(), width, height, 3, 90);
}

// cat/ (3 JPEGs, one in a subfolder), dog/ (2 JPEGs, a PNG, a text file).
std::string MakeFolder(const std::string& name) {
  const std::string dir = TempDir(name);
  ::mkdir((dir + "/cat").c_str(), 0755);
  ::mkdir((dir + "/cat/more").c_str(), 0755);
  ::mkdir((dir + "/dog").c_str(), 0755);
  WriteFile(dir + "/cat/b.jpg", ColourJpeg(60, 40, 200, 20, 20));
  WriteFile(dir + "/cat/a.JPEG", ColourJpeg(40, 60, 210, 30, 10));
  WriteFile(dir + "/cat/more/c.jpg", ColourJpeg(50, 50, 190, 25, 25));
  WriteFile(dir + "/dog/x.jpg", ColourJpeg(64, 48, 20, 20, 200));
  WriteFile(dir + "/dog/y.jpeg", ColourJpeg(48, 64, 10, 30, 210));
  std::vector<uint8_t> rgb(30 * 30 * 3, 0);
  for (size_t i = 2; i < rgb.size(); i += 3) rgb[i] = 220;
  WriteFile(dir + "/dog/z.png", EncodePng(rgb.data(), 30, 30));
  WriteFile(dir + "/dog/notes.txt", "not an image");
  return dir;
}

ImageFolderOptions Options(int threads = 1, bool train = true) {
  ImageFolderOptions o;
  o.image_size = 16;
  o.train = train;
  o.loader_threads = threads;
  o.seed = 5;
  return o;
}

std::vector<float> Images(const ImageFolderDataset& data, const std::vector<int64_t>& indices, int64_t epoch,
                          std::vector<int64_t>* labels = nullptr, int64_t* replaced = nullptr) {
  const int64_t n = static_cast<int64_t>(indices.size());
  Tensor images = Tensor::Empty({n, 3, 16, 16}, DType::kF32), l = Tensor::Empty({n}, DType::kI64);
  const int64_t r = data.Fill(indices.data(), n, epoch, images, l);
  if (replaced) *replaced = r;
  if (labels) labels->assign(l.data<int64_t>(), l.data<int64_t>() + n);
  return std::vector<float>(images.data<float>(), images.data<float>() + images.numel());
}

TEST(ImageFolderTest, ScansClassesAndFilesInSortedOrder) {
  const std::string dir = MakeFolder("scan");
  auto data = OpenImageFolder("--data", dir, Options()).value();
  EXPECT_EQ(data->classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(data->size(), 6);  // the text file is not an image
  EXPECT_EQ(data->num_classes(), 2);
  std::vector<int64_t> labels;
  Images(*data, {0, 1, 2, 3, 4, 5}, 0, &labels);
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  // Red cats, blue dogs (the PNG too): the normalized red plane is high
  // for cats and low for dogs in the evaluation transform.
  auto eval = OpenImageFolder("--eval-data", dir, Options(1, false)).value();
  const std::vector<float> pixels = Images(*eval, {0, 5}, 0);
  EXPECT_GT(pixels[0], 1.0f);                  // a cat's red
  EXPECT_LT(pixels[3 * 16 * 16], -1.0f);       // the PNG dog's red
  EXPECT_GT(pixels[3 * 16 * 16 + 2 * 256], 1.0f);  // its blue
}

TEST(ImageFolderTest, BatchesAreTheSameForAnyThreadCountAndCropsFollowTheEpoch) {
  const std::string dir = MakeFolder("threads");
  auto one = OpenImageFolder("--data", dir, Options(1)).value();
  auto three = OpenImageFolder("--data", dir, Options(3)).value();
  const std::vector<int64_t> indices = {5, 0, 3, 1, 4, 2, 0};
  const std::vector<float> a = Images(*one, indices, 2), b = Images(*three, indices, 2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, Images(*one, indices, 2));  // and again
  EXPECT_NE(a, Images(*one, indices, 3));  // another epoch, other crops
  // Sample 0 twice in one batch: the same crop (keyed by epoch and index).
  const size_t per = 3 * 16 * 16;
  EXPECT_TRUE(std::equal(a.begin() + per, a.begin() + 2 * per, a.begin() + 6 * per));
  // Evaluation does not depend on the epoch.
  auto eval = OpenImageFolder("--eval-data", dir, Options(2, false)).value();
  EXPECT_EQ(Images(*eval, indices, 0), Images(*eval, indices, 9));
}

TEST(ImageFolderTest, ACorruptFileIsReplacedByTheNextThatDecodesNamedOnceAndCounted) {
  const std::string dir = MakeFolder("corrupt");
  WriteFile(dir + "/cat/b.jpg", "this is no image");  // sample 1
  auto data = OpenImageFolder("--data", dir, Options(2)).value();
  auto clean = OpenImageFolder("--data", MakeFolder("clean"), Options(2)).value();
  std::vector<int64_t> labels;
  int64_t replaced = -1;
  ::testing::internal::CaptureStderr();
  const std::vector<float> got = Images(*data, {1, 3, 1}, 4, &labels, &replaced);
  const std::vector<float> again = Images(*data, {1}, 4);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(replaced, 2);
  // Sample 1 stands replaced by sample 2 (the next in file order), with its
  // label and its own crop.
  const std::vector<float> want = Images(*clean, {2, 3, 2}, 4);
  EXPECT_EQ(got, want);
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(again, Images(*clean, {2}, 4));
  // Named once, whatever the times it was met.
  const std::string line = "ddp_train: warning: --data imagefolder:" + dir + ": skipping " + dir +
                           "/cat/b.jpg: not a JPEG or PNG file (starts 74 68 69 73)\n";
  EXPECT_EQ(warnings, line);
}

TEST(ImageFolderTest, BadFoldersAreRefusedNamingThePath) {
  const std::string missing = TempDir("gone") + "/nothing";
  EXPECT_EQ(OpenImageFolder("--data", missing, Options()).status().message(),
            "--data imagefolder:" + missing + ": no such directory");
  const std::string empty = TempDir("empty");
  EXPECT_EQ(OpenImageFolder("--data", empty, Options()).status().message(),
            "--data imagefolder:" + empty + ": holds no class folders (one folder of .jpg, .jpeg or .png images per "
            "class)");
  const std::string text = TempDir("text");
  ::mkdir((text + "/a").c_str(), 0755);
  WriteFile(text + "/a/readme.txt", "hello");
  EXPECT_EQ(OpenImageFolder("--data", text, Options()).status().message(),
            "--data imagefolder:" + text + ": class folder " + text + "/a holds no .jpg, .jpeg or .png files");
  // A held-out folder must have the training data's classes.
  const std::string dir = MakeFolder("classes");
  ImageFolderOptions o = Options(1, false);
  o.expected_classes = {"cat", "cow"};
  EXPECT_EQ(OpenImageFolder("--eval-data", dir, o).status().message(),
            "--eval-data imagefolder:" + dir + ": class 1 is 'dog', the training data's is 'cow' (2 classes against 2)");
  // Through the dataset opener: the class count must match --num-classes.
  ImageDataOptions options;
  options.image_size = 16;
  options.num_classes = 10;
  EXPECT_EQ(OpenImageDataset("--data", "imagefolder:" + dir, options).status().message(),
            "--data imagefolder:" + dir + " has 2 class folders, --num-classes is 10: give --num-classes 2");
  options.num_classes = 2;
  EXPECT_TRUE(OpenImageDataset("--data", "imagefolder:" + dir, options).ok());
}

TEST(ImageFolderTest, FilesThatAllFailEndTheRunWithOneLine) {
  const std::string dir = TempDir("allbad");
  ::mkdir((dir + "/a").c_str(), 0755);
  for (const char* name : {"1.jpg", "2.jpg", "3.jpg"}) WriteFile(dir + "/a/" + name, "garbage");
  auto data = OpenImageFolder("--data", dir, Options()).value();
  ::testing::internal::CaptureStderr();
  try {
    Images(*data, {0}, 0);
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("3 files in a row do not decode, from " + dir + "/a/1.jpg"),
              std::string::npos)
        << e.what();
  }
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace ddp
