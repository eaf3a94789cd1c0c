// Data, ImageData and HDF5Data: batches of images (and their labels) that the trainer copies
// into the tops; the files are read by engine/src/data (a database or IDX file, for ImageData
// Caffe's list of image files, for HDF5Data its list of HDF5 files). One layer class: the three
// differ in their keys only.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dl::layers {
namespace data_layer {

class DataLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& /*bottom*/, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        // The image shape is set by the net before setup (from the file or the 'shape' key).
        const std::size_t means = m_config.mean_value.size();
        if (means > 1 && means != static_cast<std::size_t>(top[0]->dim(1))) {
            fail(fmt::format("mean_value has {} values for {} channels (give one per channel, or "
                             "one for all)",
                             means, top[0]->dim(1)));
        }
        if (top.size() > 1) {
            top[1]->reshape({m_config.batch_size});
        }
    }
    void forward(const Blobs& /*bottom*/, const Blobs& /*top*/) override {}
    void backward(const Blobs&, const std::vector<bool>&, const Blobs&) override {}
    [[nodiscard]] bool can_backward() const override { return false; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t top_count() const override {
        return m_config.label_source.empty() ? 1 : 2;
    }
};

/// The keys of Caffe's transform_param, which both types take.
void transform_fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("scale", "transform_param").or_older("data_param", "scale"), l.scale);
    v.numbers(field("mean_value", "transform_param")
                  .when_set()
                  .expecting("a number or a list of numbers, one per channel"),
              l.mean_value);
    // Caffe's older files say scale, mean_file, crop_size and mirror in data_param; Caffe moves
    // them into transform_param (UpgradeNetDataTransformation), and so does this.
    v.text(field("mean_file", "transform_param").or_older("data_param", "mean_file").when_set(),
           l.mean_file);
    v.integer(field("crop_size", "transform_param").or_older("data_param", "crop_size").when_set(),
              l.crop_size);
    v.flag(field("mirror", "transform_param").or_older("data_param", "mirror").when_set(),
           l.mirror);
    v.integers(field("shape").when_set().expecting("[channels, height, width]"), l.shape);
}

void fields(FieldVisitor& v, LayerConfig& l) {
    v.text(field("source", "data_param"), l.source);
    v.text(field("label_source"), l.label_source); // Caffe reads labels from the source
    v.text(field("backend", "data_param").when_set(), l.backend);
    v.integer(field("batch_size", "data_param"), l.batch_size);
    v.flag(field("shuffle"), l.shuffle);
    transform_fields(v, l);
    v.caffe_ignores({"data_param", "prefetch"});
}

void image_data_fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "image_data_param";
    v.text(field("source", m), l.source);
    v.text(field("label_source"), l.label_source); // the list's labels, when given
    v.integer(field("batch_size", m), l.batch_size);
    v.flag(field("shuffle", m), l.shuffle);
    v.text(field("root_folder", m).when_set(), l.root_folder);
    v.integer(field("new_height", m).when_set(), l.new_height);
    v.integer(field("new_width", m).when_set(), l.new_width);
    v.flag(field("is_color", m), l.is_color);
    transform_fields(v, l);
    v.caffe_requires({m, "rand_skip"}, "0",
                     "rand_skip {} is not supported (dltrain's shuffle draws a fresh order every "
                     "epoch from solver.random_seed)");
}

// Caffe's HDF5DataLayer takes no transform_param: its values are used as the file holds them.
void hdf5_data_fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "hdf5_data_param";
    v.text(field("source", m), l.source);
    v.text(field("label_source"), l.label_source); // the files' second top's dataset
    v.integer(field("batch_size", m), l.batch_size);
    v.flag(field("shuffle", m), l.shuffle);
    v.integers(field("shape").when_set().expecting("[channels, height, width]"), l.shape);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (l.source.empty()) {
        c.fail("source", fmt::format("{} of type {} needs key 'source'", c.where(), l.type));
    }
    if (l.type == "ImageData") {
        c.at_least("new_height", l.new_height, 0);
        c.at_least("new_width", l.new_width, 0);
        if ((l.new_height > 0) != (l.new_width > 0)) {
            c.fail(l.new_height > 0 ? "new_width" : "new_height",
                   fmt::format("{}: new_height and new_width are set together (Caffe's rule)",
                               c.where()));
        }
    }
    if (l.type != "Data" && !l.label_source.empty() && l.label_source != l.source) {
        c.fail("label_source", fmt::format("{}: its source holds the labels: label_source is "
                                           "its source or unset",
                                           c.where()));
    }
    if (!l.backend.empty()) {
        c.choice("backend", l.backend, {"lmdb", "leveldb"});
    }
    c.required_at_least("batch_size", l.batch_size, 1);
    c.finite("scale", l.scale);
    for (const float mean : l.mean_value) {
        c.finite("mean_value", mean);
    }
    if (!l.mean_file.empty() && !l.mean_value.empty()) {
        c.fail("mean_file",
               fmt::format("{}: give mean_file or mean_value, not both (Caffe's rule)", c.where()));
    }
    if ((!l.shape.empty() || l.marks.count("shape") != 0) &&
        (l.shape.size() != 3 ||
         std::any_of(l.shape.begin(), l.shape.end(), [](int d) { return d < 1; }))) {
        c.fail("shape",
               fmt::format("key 'shape' in {} must be [channels, height, width]", c.where()));
    }
    c.at_least("crop_size", l.crop_size, 0);
    if (l.shape.size() == 3 && l.crop_size > std::min(l.shape[1], l.shape[2])) {
        c.fail("crop_size", fmt::format("key 'crop_size' in {}: {} is larger than the {}x{} images "
                                        "of its 'shape'",
                                        c.where(), l.crop_size, l.shape[1], l.shape[2]));
    }
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& /*bottom*/) {
    if (l.shape.size() != 3) {
        return std::nullopt; // the images' shape is known once their file is read
    }
    Planned made;
    const std::vector<int> image = input_shape(l);
    made.tops.push_back({l.batch_size, image[0], image[1], image[2]});
    if (!l.label_source.empty()) {
        made.tops.push_back({l.batch_size});
    }
    return made;
}

void from_caffe(LayerConfig& l) {
    // Caffe's Data layer has one source; a second top is its labels.
    if (l.tops.size() > 1) {
        l.label_source = l.source;
    }
}

void to_caffe(LayerConfig& l, std::vector<std::string>& lost) {
    if (l.backend.empty()) {
        l.backend = "lmdb"; // Caffe's default is LevelDB; most of its examples are LMDBs
    }
    if (l.shuffle) {
        lost.push_back(fmt::format("layer '{}': shuffle (Caffe reads in file order)", l.name));
    }
    if (!l.label_source.empty() && l.label_source != l.source) {
        lost.push_back(fmt::format("layer '{}': label_source {} (Caffe's Data layer reads labels "
                                   "from its source)",
                                   l.name, l.label_source));
    }
    if (!l.shape.empty()) {
        lost.push_back(fmt::format("layer '{}': shape (Caffe takes it from the data)", l.name));
    }
}

void image_data_to_caffe(LayerConfig& l, std::vector<std::string>& lost) {
    if (!l.shape.empty()) {
        lost.push_back(fmt::format("layer '{}': shape (Caffe takes it from the files)", l.name));
    }
}

} // namespace data_layer

LayerKind data() {
    return LayerKind{.type = "Data",
                     .role = LayerRole::input,
                     .no_bottoms = true,
                     .fields = data_layer::fields,
                     .check = data_layer::check,
                     .plan = data_layer::plan,
                     .make = make_as<data_layer::DataLayer>,
                     .from_caffe = data_layer::from_caffe,
                     .to_caffe = data_layer::to_caffe};
}

LayerKind image_data() {
    return LayerKind{.type = "ImageData",
                     .role = LayerRole::input,
                     .no_bottoms = true,
                     .fields = data_layer::image_data_fields,
                     .check = data_layer::check,
                     .plan = data_layer::plan,
                     .make = make_as<data_layer::DataLayer>,
                     .from_caffe = data_layer::from_caffe,
                     .to_caffe = data_layer::image_data_to_caffe};
}

LayerKind hdf5_data() {
    return LayerKind{.type = "HDF5Data",
                     .role = LayerRole::input,
                     .no_bottoms = true,
                     .fields = data_layer::hdf5_data_fields,
                     .check = data_layer::check,
                     .plan = data_layer::plan,
                     .make = make_as<data_layer::DataLayer>,
                     .from_caffe = data_layer::from_caffe,
                     .to_caffe = data_layer::image_data_to_caffe};
}

} // namespace dl::layers
