#include <dljob/app/reports/plot_gnuplot.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace dljob::app {
namespace {

/// Length of the UTF-8 sequence starting at text[i], 0 when it is not valid UTF-8.
std::size_t utf8_length(std::string_view text, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
    } else {
        return 0;
    }
    if (i + length > text.size()) {
        return 0;
    }
    for (std::size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xC0U) != 0x80) {
            return 0;
        }
    }
    // Overlong forms and surrogates are not UTF-8 either (XML parsers reject them).
    const unsigned char second = byte(i + 1);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
        (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F)) {
        return 0;
    }
    return length;
}

struct TimeUnit {
    double seconds = 1;
    const char* name = "s";
};

// Whole hours of training read better in hours than as 7200 seconds.
TimeUnit time_unit(const std::vector<PlotSeries>& series) {
    double longest = 0;
    for (const auto& s : series) {
        for (const auto* curve : {&s.curves.train_loss, &s.curves.test_loss}) {
            for (const auto& point : *curve) {
                longest = std::max(longest, point.time_s);
            }
        }
    }
    if (longest >= 2 * 3600.0) {
        return {3600, "h"};
    }
    if (longest >= 2 * 60.0) {
        return {60, "min"};
    }
    return {};
}

void add_datablock(std::string& script, const std::string& name,
                   const std::vector<CurvePoint>& curve, PlotAxis axis, TimeUnit unit) {
    script += fmt::format("${} << EOD\n", name);
    for (const auto& point : curve) {
        if (axis == PlotAxis::iteration) {
            script += fmt::format("{} {}\n", point.iter, point.value);
        } else {
            script += fmt::format("{} {}\n", point.time_s / unit.seconds, point.value);
        }
    }
    script += "EOD\n";
}

std::string join(const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) {
        text += text.empty() ? "" : ", ";
        text += item;
    }
    return text;
}

} // namespace

std::string gnuplot_string(std::string_view text) {
    std::string quoted = "'";
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\'') {
            quoted += "''";
            ++i;
        } else if (c < 0x20 || c == 0x7F) {
            quoted += ' ';
            ++i;
        } else if (c < 0x80) {
            quoted += static_cast<char>(c);
            ++i;
        } else if (const auto length = utf8_length(text, i); length > 0) {
            quoted += text.substr(i, length);
            i += length;
        } else {
            quoted += '?';
            ++i;
        }
    }
    quoted += "'";
    return quoted;
}

std::string gnuplot_script(const std::vector<PlotSeries>& series, PlotAxis axis, ImageKind kind) {
    const TimeUnit unit = time_unit(series);
    std::string script;
    // noenhanced: a label's _ ^ { } @ & are text, not markup. Fixed size so that every image
    // of a sweep lines up.
    if (kind == ImageKind::svg) {
        script += "set terminal svg size 1000,760 noenhanced font 'sans,11' "
                  "background rgb 'white'\n";
    } else {
        // pngcairo draws antialiased lines; a gnuplot built without cairo still has libgd's png.
        script += "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                  "    set terminal pngcairo size 1000,760 noenhanced font 'sans,10' "
                  "background rgb 'white'\n"
                  "} else {\n"
                  "    set terminal png size 1000,760 noenhanced\n"
                  "}\n";
    }
    script += "set encoding utf8\n";

    bool any_accuracy = false;
    for (std::size_t i = 0; i < series.size(); ++i) {
        const auto& curves = series[i].curves;
        add_datablock(script, fmt::format("train{}", i), curves.train_loss, axis, unit);
        add_datablock(script, fmt::format("test{}", i), curves.test_loss, axis, unit);
        add_datablock(script, fmt::format("accuracy{}", i), curves.test_accuracy, axis, unit);
        any_accuracy = any_accuracy || !curves.test_accuracy.empty();
    }

    script += fmt::format("set multiplot layout {},1\n", any_accuracy ? 2 : 1);
    script += axis == PlotAxis::iteration
                  ? std::string("set xlabel 'iteration'\n")
                  : fmt::format("set xlabel 'training time ({})'\n", unit.name);
    script += "set grid\nset key below\nset title 'loss'\nset ylabel 'loss'\n";
    std::vector<std::string> items;
    for (std::size_t i = 0; i < series.size(); ++i) {
        const auto color = i + 1;
        if (!series[i].curves.train_loss.empty()) {
            items.push_back(
                fmt::format("$train{} using 1:2 with lines lc {} lw 1.5 dt 1 notitle", i, color));
        }
        if (!series[i].curves.test_loss.empty()) {
            items.push_back(fmt::format(
                "$test{} using 1:2 with linespoints lc {} dt 2 pt 7 ps 0.5 notitle", i, color));
        }
    }
    for (std::size_t i = 0; i < series.size(); ++i) {
        items.push_back(fmt::format("keyentry with lines lc {} lw 3 title {}", i + 1,
                                    gnuplot_string(series[i].label)));
    }
    items.emplace_back("keyentry with lines lc 'black' dt 1 title 'training loss'");
    items.emplace_back("keyentry with linespoints lc 'black' dt 2 pt 7 ps 0.5 title 'test loss'");
    script += "plot " + join(items) + "\n";

    if (any_accuracy) {
        items.clear();
        for (std::size_t i = 0; i < series.size(); ++i) {
            if (!series[i].curves.test_accuracy.empty()) {
                items.push_back(fmt::format(
                    "$accuracy{} using 1:2 with linespoints lc {} pt 7 ps 0.5 notitle", i, i + 1));
            }
        }
        // The loss panel's x range, so that one iteration (or minute) is at the same place
        // in both panels.
        script += "set xrange [GPVAL_X_MIN:GPVAL_X_MAX]\n";
        script += "unset key\nset title 'test accuracy'\nset ylabel 'accuracy'\n";
        script += "plot " + join(items) + "\n";
    }
    script += "unset multiplot\n";
    return script;
}

} // namespace dljob::app
