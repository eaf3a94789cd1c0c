#pragma once
// The one place that writes gnuplot's language (`dljob plot`). gnuplot runs as a program
// through ProcessRunner with the script on stdin and the image on stdout, so no path reaches
// the script; the only user text in it are legend labels, written as escaped string literals.
// The data go in as inline datablocks of numbers that dljob formats itself.
//
// The drawing, in this order (tests find the curves by it): a top panel "loss" with, per series,
// its training loss (solid line) then its test loss (dashed, with points), each curve only when it
// has points, then the legend entries (one per series, then "training loss", "test loss"); a
// bottom panel "test accuracy" (only when some series has one) with each series' accuracy.

#include <dljob/app/reports/plot.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace dljob::app {

enum class ImageKind { png, svg };

/// A gnuplot string literal of `text`: single-quoted (gnuplot expands no escape, macro or
/// backquote inside), a quote doubled; control characters, which would end the line the literal
/// is on, become spaces, and bytes that are not UTF-8 become '?', so the SVG stays valid XML.
std::string gnuplot_string(std::string_view text);

/// The whole script for these series.
std::string gnuplot_script(const std::vector<PlotSeries>& series, PlotAxis axis, ImageKind kind);

} // namespace dljob::app
