// A small document model for the final report, rendered twice: as Markdown (report.md) and as a
// self-contained HTML page (report.html, images embedded as data URIs). Text may use `code` and
// **bold**, the only inline markup either renderer needs.
#pragma once

#include <string>
#include <vector>

namespace flashcore::bench {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct Block {
  enum class Kind { kHeading, kParagraph, kList, kTable, kImage };
  Kind kind = Kind::kParagraph;
  int level = 2;                   // heading
  std::string text;                // heading, paragraph; image: alt text
  std::vector<std::string> items;  // list
  Table table;                     // table
  std::string path;                // image: a PNG, relative to the output folder
};

class Document {
 public:
  void heading(int level, const std::string& text);
  void paragraph(const std::string& text);
  void list(const std::vector<std::string>& items);
  void table(const Table& table);
  void image(const std::string& path, const std::string& alt);
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  std::vector<Block> blocks_;
};

std::string render_markdown(const Document& doc);
// out_dir: where image paths are read from, to embed them.
std::string render_html(const Document& doc, const std::string& title, const std::string& out_dir);

std::string base64(const std::string& bytes);

}  // namespace flashcore::bench
