#include "report_doc.hpp"

#include <cstdint>
#include <fstream>
#include <sstream>

namespace flashcore::bench {
namespace {

std::string escape_html(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

// `code` -> <code>, **bold** -> <strong>, the rest escaped.
std::string inline_html(const std::string& s) {
  std::string out;
  bool code = false, bold = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '`') {
      out += code ? "</code>" : "<code>";
      code = !code;
    } else if (!code && s.compare(i, 2, "**") == 0) {
      out += bold ? "</strong>" : "<strong>";
      bold = !bold;
      ++i;
    } else {
      out += escape_html(std::string(1, s[i]));
    }
  }
  if (code) out += "</code>";
  if (bold) out += "</strong>";
  return out;
}

// A table cell of Markdown: pipes and newlines would end the cell.
std::string md_cell(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '|') {
      out += "\\|";
    } else if (ch == '\n') {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

const char* const kStyle =
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
    "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px "
    "solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}code{background:#f6f6f6;"
    "padding:0 3px}img{max-width:100%}";

}  // namespace

void Document::heading(int level, const std::string& text) {
  Block b;
  b.kind = Block::Kind::kHeading;
  b.level = level;
  b.text = text;
  blocks_.push_back(b);
}

void Document::paragraph(const std::string& text) {
  Block b;
  b.kind = Block::Kind::kParagraph;
  b.text = text;
  blocks_.push_back(b);
}

void Document::list(const std::vector<std::string>& items) {
  Block b;
  b.kind = Block::Kind::kList;
  b.items = items;
  blocks_.push_back(b);
}

void Document::table(const Table& table) {
  Block b;
  b.kind = Block::Kind::kTable;
  b.table = table;
  blocks_.push_back(b);
}

void Document::image(const std::string& path, const std::string& alt) {
  Block b;
  b.kind = Block::Kind::kImage;
  b.path = path;
  b.text = alt;
  blocks_.push_back(b);
}

std::string render_markdown(const Document& doc) {
  std::ostringstream out;
  for (const Block& b : doc.blocks()) {
    switch (b.kind) {
      case Block::Kind::kHeading:
        out << std::string(static_cast<size_t>(b.level), '#') << " " << b.text << "\n\n";
        break;
      case Block::Kind::kParagraph:
        out << b.text << "\n\n";
        break;
      case Block::Kind::kList:
        for (const std::string& item : b.items) out << "- " << item << "\n";
        out << "\n";
        break;
      case Block::Kind::kTable: {
        out << "|";
        for (const std::string& h : b.table.header) out << " " << md_cell(h) << " |";
        out << "\n|";
        for (size_t i = 0; i < b.table.header.size(); ++i) out << "---|";
        out << "\n";
        for (const auto& row : b.table.rows) {
          out << "|";
          for (const std::string& c : row) out << " " << md_cell(c) << " |";
          out << "\n";
        }
        out << "\n";
        break;
      }
      case Block::Kind::kImage:
        out << "![" << b.text << "](" << b.path << ")\n\n";
        break;
    }
  }
  return out.str();
}

std::string render_html(const Document& doc, const std::string& title, const std::string& out_dir) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << escape_html(title)
      << "</title><style>" << kStyle << "</style></head><body>\n";
  for (const Block& b : doc.blocks()) {
    switch (b.kind) {
      case Block::Kind::kHeading:
        out << "<h" << b.level << ">" << inline_html(b.text) << "</h" << b.level << ">\n";
        break;
      case Block::Kind::kParagraph:
        out << "<p>" << inline_html(b.text) << "</p>\n";
        break;
      case Block::Kind::kList:
        out << "<ul>\n";
        for (const std::string& item : b.items) out << "<li>" << inline_html(item) << "</li>\n";
        out << "</ul>\n";
        break;
      case Block::Kind::kTable:
        out << "<table>\n<tr>";
        for (const std::string& h : b.table.header) out << "<th>" << inline_html(h) << "</th>";
        out << "</tr>\n";
        for (const auto& row : b.table.rows) {
          out << "<tr>";
          for (const std::string& c : row) out << "<td>" << inline_html(c) << "</td>";
          out << "</tr>\n";
        }
        out << "</table>\n";
        break;
      case Block::Kind::kImage: {
        std::ifstream in(out_dir + "/" + b.path, std::ios::binary);
        std::ostringstream bytes;
        bytes << in.rdbuf();
        if (!in || bytes.str().empty()) {
          out << "<p><em>image " << escape_html(b.path) << " is missing</em></p>\n";
        } else {
          out << "<p><img alt=\"" << escape_html(b.text) << "\" src=\"data:image/png;base64,"
              << base64(bytes.str()) << "\"></p>\n";
        }
        break;
      }
    }
  }
  out << "</body></html>\n";
  return out.str();
}

std::string base64(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t(uint8_t(bytes[i])) << 16) |
                       (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint8_t(bytes[i + 2]);
    for (const int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i < bytes.size()) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace flashcore::bench
