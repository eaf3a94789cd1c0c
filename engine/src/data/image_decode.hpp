#pragma once
// Decodes one image held in memory (PNG through libpng, JPEG through libjpeg-turbo, binary
// PGM/PPM by hand) into 8-bit pixels, channel-major (Caffe's CxHxW). Colour comes out BGR:
// Caffe reads image files through OpenCV, whose order that is, so its encoded datums, image
// lists, mean files and every model trained on them are BGR.

#include <cstdint>
#include <string>
#include <vector>

namespace dl::data {

struct DecodedImage {
    int channels = 0; // 1 (grey) or 3 (blue, green, red planes)
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> pixels; // channels x height x width
};

/// `channels` 0 keeps the image's own (grey stays 1, colour becomes 3); 1 or 3 converts.
/// Throws dl::Error(config) naming `what` for an unknown or damaged image.
DecodedImage decode_image(const std::vector<std::uint8_t>& bytes, int channels,
                          const std::string& what);

/// The image resized to height x width as OpenCV's cv::resize with INTER_LINEAR does it (pixel
/// centres aligned, edges clamped, rounded to 8 bits), which Caffe's classification example
/// and ImageData layer use.
DecodedImage resize_bilinear(const DecodedImage& image, int height, int width);

} // namespace dl::data
