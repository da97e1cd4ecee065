// Names from outside as text, sizes read by one parser, and the one writer
// of files: staged outputs that go together, inputs compared by identity.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "core/limits.hpp"
#include "core/output_file.hpp"
#include "core/text.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
namespace fs = std::filesystem;

TEST(Text, PrintableKeepsTextAndEscapesEveryOtherByte) {
  EXPECT_EQ(printable("r.json"), "r.json");
  EXPECT_EQ(printable("d\xc3\xa9j\xc3\xa0 vu \xe2\x82\xac"), "d\xc3\xa9j\xc3\xa0 vu \xe2\x82\xac");  // UTF-8 as it is
  EXPECT_EQ(printable("bad\xff.npz"), "bad\\xff.npz");
  EXPECT_EQ(printable("new\nline\t.json"), "new\\x0aline\\x09.json");
  EXPECT_EQ(printable("\xc3"), "\\xc3");                      // cut short
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");             // overlong
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");    // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable(printable("a\xff\n")), printable("a\xff\n"));  // once is enough
  EXPECT_TRUE(is_plain_text("configs/ci.json"));
  EXPECT_FALSE(is_plain_text("bad\xff"));
  EXPECT_FALSE(is_plain_text("a\nb"));
}

TEST(Limits, SizesAreReadOneWayEverywhere) {
  EXPECT_EQ(parse_size("--max-memory", "65536"), 65536u);
  EXPECT_EQ(parse_size("--max-memory", "800M"), 800ull << 20);
  EXPECT_EQ(parse_size("--max-memory", "8g"), 8ull << 30);
  EXPECT_EQ(parse_size("--max-memory", "1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_size("--max-memory", "2kb"), 2048u);
  EXPECT_EQ(parse_size("--max-memory", "16777215T"), 16777215ull << 40);
  for (const char* bad : {"0x100", "-1", "+5", "inf", "nan", "1e3", " 5", "5 ", "0", "8X", "16777216T", "", "G",
                          "18446744073709551616"})
    EXPECT_THROW(parse_size("--max-memory", bad), UsageError) << bad;
  // The environment's limits read the same way (once 0x100 and 8g differed).
  ::setenv("CHUNKINV_MAX_CONFIG_BYTES", "0x100", 1);
  EXPECT_THROW(byte_limit("CHUNKINV_MAX_CONFIG_BYTES", 1), UsageError);
  ::setenv("CHUNKINV_MAX_CONFIG_BYTES", "8g", 1);
  EXPECT_EQ(byte_limit("CHUNKINV_MAX_CONFIG_BYTES", 1), 8ull << 30);
  ::unsetenv("CHUNKINV_MAX_CONFIG_BYTES");
}

TEST(OutputFile, StagedAndNeverPublishedLeavesNothing) {
  const std::string dir = chunkinv::testing::test_dir("text");
  {
    std::ofstream(dir + "/old") << "before";
    OutputFile out(dir + "/old");
    out.stage("after");
    EXPECT_EQ(chunkinv::testing::slurp(dir + "/old"), "before");
  }
  EXPECT_EQ(chunkinv::testing::slurp(dir + "/old"), "before");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "no temporary left";
  OutputFile out(dir + "/old");
  out.stage("after");
  out.publish();
  EXPECT_EQ(chunkinv::testing::slurp(dir + "/old"), "after");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(OutputFile, OneDestinationHoweverSpelled) {
  const std::string dir = chunkinv::testing::test_dir("text");
  fs::create_directories(dir + "/a");
  EXPECT_TRUE(OutputFile(dir + "/a/r.json").same_destination(OutputFile(dir + "/a/../a/r.json")));
  EXPECT_FALSE(OutputFile(dir + "/a/r.json").same_destination(OutputFile(dir + "/a/s.json")));
  std::ofstream(dir + "/a/r.json") << "{}";
  fs::create_symlink("a/r.json", dir + "/link");
  EXPECT_TRUE(OutputFile(dir + "/a/r.json").same_destination(OutputFile(dir + "/link")));
  // A folder input counts its files.
  std::ofstream(dir + "/a/g.npy") << "x";
  EXPECT_THROW(OutputFile(dir + "/a/g.npy").refuse_overwriting({dir + "/a"}), UsageError);
  EXPECT_NO_THROW(OutputFile(dir + "/a/new.npy").refuse_overwriting({dir + "/a"}));
  EXPECT_NO_THROW(OutputFile(dir + "/b.json").refuse_overwriting({dir + "/a"}));
  fs::remove_all(dir);
}
