// SQuAD's exact match and F1 against the official evaluate-v1.1.py run by
// Python itself (tests/golden/make_squad_metric_golden.py): every drawn
// pair's EM exactly and F1 to 1e-12, and the Python character classes the
// normalization rests on (str.isspace(), re's \w, str.lower()) on every
// code point assigned in both Python's Unicode and ICU's.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "runtime/data/squad.h"
#include "tests/golden.h"

namespace ddp {
namespace {

const nlohmann::json& Golden() {
  static const nlohmann::json golden = testing::ReadGolden("squad_metric_golden.json");
  return golden;
}

std::string Utf8(char32_t c) {
  std::string out;
  icu::UnicodeString(static_cast<UChar32>(c)).toUTF8String(out);
  return out;
}

// Whether `c` lies in one of the golden's [first, last] ranges.
bool InRanges(const nlohmann::json& ranges, char32_t c) {
  size_t lo = 0, hi = ranges.size();
  while (lo < hi) {  // the first range whose last is >= c
    const size_t mid = (lo + hi) / 2;
    if (ranges[mid][1].get<char32_t>() < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < ranges.size() && ranges[lo][0].get<char32_t>() <= c;
}

// Assigned in both Unicode versions: Python's (the golden's) and ICU's.
bool AssignedInBoth(char32_t c) {
  return InRanges(Golden()["assigned"], c) && u_charType(static_cast<UChar32>(c)) != U_UNASSIGNED;
}

TEST(SquadMetricGoldenTest, EveryPairScoresAsTheOfficialScript) {
  const nlohmann::json& pairs = Golden()["pairs"];
  ASSERT_GE(pairs.size(), 400u);
  int64_t wrong = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const nlohmann::json& pair = pairs[i];
    const std::string prediction = pair["prediction"].get<std::string>();
    const std::vector<std::string> truths = pair["truths"].get<std::vector<std::string>>();
    const double em = ExactMatch(prediction, truths), f1 = F1Score(prediction, truths);
    const bool ok = em == (pair["em"].get<bool>() ? 1.0 : 0.0) && std::abs(f1 - pair["f1"].get<double>()) <= 1e-12;
    if (!ok && ++wrong <= 10) {
      ADD_FAILURE() << "pair " << i << ": prediction '" << prediction << "' normalized '" << NormalizeAnswer(prediction)
                    << "', first truth normalized '" << NormalizeAnswer(truths.front()) << "': EM " << em << " F1 "
                    << f1 << ", Python EM " << pair["em"] << " F1 " << pair["f1"];
    }
  }
  EXPECT_EQ(wrong, 0) << "pairs scored unlike Python, of " << pairs.size();
}

TEST(SquadMetricGoldenTest, WordCharactersAreRes) {
  const nlohmann::json& word = Golden()["word"];
  int64_t checked = 0, wrong = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (!AssignedInBoth(c)) continue;
    ++checked;
    if (IsPythonWordChar(c) != InRanges(word, c) && ++wrong <= 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": \\w is " << InRanges(word, c) << " in Python";
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checked, 140000) << "code points compared";
}

TEST(SquadMetricGoldenTest, SpacesAreStrIsspaces) {
  std::vector<char32_t> python;
  for (const nlohmann::json& c : Golden()["space"]) python.push_back(c.get<char32_t>());
  std::vector<char32_t> ours;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (IsPythonSpace(c)) ours.push_back(c);
  }
  EXPECT_EQ(ours, python);
  EXPECT_EQ(python.size(), 29u);  // 0x09-0x0D, 0x1C-0x20, 0x85, 0xA0, 0x1680, 0x2000-0x200A, 0x2028-9, 0x202F, 0x205F, 0x3000
}

TEST(SquadMetricGoldenTest, LowerCaseIsStrLowers) {
  int64_t checked = 0, wrong = 0;
  for (const nlohmann::json& entry : Golden()["lower"]) {
    const char32_t c = entry[0].get<char32_t>();
    if (!AssignedInBoth(c)) continue;
    ++checked;
    const std::string ours = PythonLower(Utf8(c)), python = entry[1].get<std::string>();
    if (ours != python && ++wrong <= 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << " lower-cases to '" << ours << "', Python '"
                    << python << "'";
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(checked, 1400);
}

}  // namespace
}  // namespace ddp
