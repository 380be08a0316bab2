#include "plot_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace flashcore::bench {
namespace {

constexpr int kPanelWidth = 420;
constexpr int kPanelHeight = 300;
constexpr int kMarginLeft = 55;
constexpr int kMarginBottom = 40;
constexpr int kMarginTop = 30;
constexpr int kLegendHeight = 18;
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string series_name(const Result& r) {
  std::string name = r.provider;
  if (r.c.window_left >= 0) {
    name += " window" + std::to_string(r.c.window_left);
  } else if (r.c.causal) {
    name += " causal";
  }
  return name;
}

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string render_svg(const std::vector<Result>& results) {
  // head dim -> series -> seqlen -> best TFLOP/s. The same kernel can run under two workload names
  // (e.g. flashcore:sm80 and an optimized target that resolved to sm80); one point per provider.
  std::map<int64_t, std::map<std::string, std::map<int64_t, double>>> panels;
  std::vector<std::string> series_order;
  double y_max = 0;
  int64_t s_min = 0, s_max = 0;
  for (const Result& r : results) {
    if (r.outcome != Outcome::kOk || !r.tflops) continue;
    // The x axis is one sequence length, so only square problems belong; decode (Sq != Sk) is
    // memory-bound and is read by its % copy in report.md instead.
    if (r.c.seqlen_q != r.c.seqlen_k) continue;
    const std::string name = series_name(r);
    if (std::find(series_order.begin(), series_order.end(), name) == series_order.end()) {
      series_order.push_back(name);
    }
    double& point = panels[r.c.head_dim][name][r.c.seqlen_q];
    point = std::max(point, *r.tflops);
    y_max = std::max(y_max, *r.tflops);
    s_min = s_min == 0 ? r.c.seqlen_q : std::min(s_min, r.c.seqlen_q);
    s_max = std::max(s_max, r.c.seqlen_q);
  }
  const int legend_rows = static_cast<int>((series_order.size() + 2) / 3);
  const int width = std::max<int>(1, static_cast<int>(panels.size())) * kPanelWidth;
  const int height = kPanelHeight + legend_rows * kLegendHeight + 20;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (panels.empty()) {
    svg << "<text x=\"20\" y=\"40\">no timed results to plot</text>\n</svg>\n";
    return svg.str();
  }
  // Round the y range up to a 'nice' step so gridlines land on readable values.
  const double step = std::pow(10.0, std::floor(std::log10(std::max(y_max, 1e-3)))) / 2;
  const double y_top = std::ceil(y_max / step) * step;
  const double lx_min = std::log2(static_cast<double>(s_min));
  const double lx_max = std::max(lx_min + 1, std::log2(static_cast<double>(s_max)));
  const int plot_w = kPanelWidth - kMarginLeft - 15;
  const int plot_h = kPanelHeight - kMarginTop - kMarginBottom;

  int panel_index = 0;
  for (const auto& [head_dim, series] : panels) {
    const int x0 = panel_index * kPanelWidth + kMarginLeft;
    const int y0 = kMarginTop;
    auto px = [&](int64_t s) {
      return x0 + (std::log2(static_cast<double>(s)) - lx_min) / (lx_max - lx_min) * plot_w;
    };
    auto py = [&](double t) { return y0 + plot_h - t / y_top * plot_h; };
    svg << "<text x=\"" << x0 + plot_w / 2 << "\" y=\"18\" text-anchor=\"middle\" "
        << "font-weight=\"bold\">head dim " << head_dim << "</text>\n";
    for (double t = 0; t <= y_top + step / 2; t += step) {
      svg << "<line x1=\"" << x0 << "\" x2=\"" << x0 + plot_w << "\" y1=\"" << py(t) << "\" y2=\""
          << py(t) << "\" stroke=\"#ddd\"/>\n"
          << "<text x=\"" << x0 - 5 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">" << t
          << "</text>\n";
    }
    for (int64_t s = 1; s <= s_max; s *= 2) {
      if (s < s_min) continue;
      svg << "<text x=\"" << px(s) << "\" y=\"" << y0 + plot_h + 15 << "\" text-anchor=\"middle\">"
          << s << "</text>\n";
    }
    svg << "<text x=\"" << x0 + plot_w / 2 << "\" y=\"" << y0 + plot_h + 32
        << "\" text-anchor=\"middle\">seqlen</text>\n"
        << "<text transform=\"translate(" << x0 - 42 << "," << y0 + plot_h / 2
        << ") rotate(-90)\" text-anchor=\"middle\">TFLOP/s</text>\n"
        << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << plot_w << "\" height=\""
        << plot_h << "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (const auto& [name, points] : series) {
      const size_t color_index =
          std::find(series_order.begin(), series_order.end(), name) - series_order.begin();
      const char* color = kColors[color_index % (sizeof(kColors) / sizeof(kColors[0]))];
      const bool dashed = name.find(' ') != std::string::npos;  // masked variants
      svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
          << (dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"";
      for (const auto& [s, t] : points) svg << px(s) << "," << py(t) << " ";
      svg << "\"/>\n";
      for (const auto& [s, t] : points) {
        svg << "<circle cx=\"" << px(s) << "\" cy=\"" << py(t) << "\" r=\"3\" fill=\"" << color
            << "\"><title>" << escape(name) << " S=" << s << ": " << t
            << " TFLOP/s</title></circle>\n";
      }
    }
    ++panel_index;
  }
  for (size_t i = 0; i < series_order.size(); ++i) {
    const int x = 20 + static_cast<int>(i % 3) * 220;
    const int y = kPanelHeight + 5 + static_cast<int>(i / 3) * kLegendHeight;
    svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"12\" height=\"12\" fill=\""
        << kColors[i % (sizeof(kColors) / sizeof(kColors[0]))] << "\"/>\n"
        << "<text x=\"" << x + 18 << "\" y=\"" << y + 10 << "\">" << escape(series_order[i])
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace flashcore::bench
