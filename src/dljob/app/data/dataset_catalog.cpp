#include <dljob/app/data/dataset_catalog.hpp>
#include <dljob/util/text.hpp>

namespace dljob::app {
namespace {

// Published checksums: MNIST and Fashion-MNIST MD5s are torchvision's `resources` lists (also
// the authors' pages); CIFAR-10's is on its authors' page (the binary version, which C++ reads
// without a pickle parser); its SHA-256 and size are as recorded by several projects that pin it.
//
// Debian's dataset-fashion-mnist (0.0~git20200523.55506a9-1) recompressed the files: its gzip
// headers lack the original file name (each file is exactly name+NUL bytes shorter than the
// published size, consistent with only the header differing), so their MD5s differ from the
// published ones. The package's files are pinned here by their own SHA-256.
CatalogDataset mnist() {
    return {"mnist",
            "MNIST handwritten digits (LeCun, Cortes, Burges), 60,000 + 10,000 28x28 images, IDX",
            "",
            "",
            {
                {"train-images-idx3-ubyte.gz",
                 {"https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz",
                  "http://yann.lecun.com/exdb/mnist/train-images-idx3-ubyte.gz"},
                 "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                 "",
                 9912422,
                 ""},
                {"train-labels-idx1-ubyte.gz",
                 {"https://ossci-datasets.s3.amazonaws.com/mnist/train-labels-idx1-ubyte.gz",
                  "http://yann.lecun.com/exdb/mnist/train-labels-idx1-ubyte.gz"},
                 "d53e105ee54ea40749a09fcbcd1e9432",
                 "",
                 28881,
                 ""},
                {"t10k-images-idx3-ubyte.gz",
                 {"https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz",
                  "http://yann.lecun.com/exdb/mnist/t10k-images-idx3-ubyte.gz"},
                 "9fb629c4189551a2d022fa330f9573f3",
                 "",
                 1648877,
                 ""},
                {"t10k-labels-idx1-ubyte.gz",
                 {"https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz",
                  "http://yann.lecun.com/exdb/mnist/t10k-labels-idx1-ubyte.gz"},
                 "ec29112dd5afa0611ce80d1b7f02629c",
                 "",
                 4542,
                 ""},
            }};
}

CatalogDataset fashion_mnist() {
    return {"fashion-mnist",
            "Fashion-MNIST (Zalando), 60,000 + 10,000 28x28 clothing images, IDX",
            "dataset-fashion-mnist",
            "fashion-mnist",
            {
                {"train-images-idx3-ubyte.gz",
                 {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
                  "train-images-idx3-ubyte.gz",
                  "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"
                  "train-images-idx3-ubyte.gz"},
                 "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                 "",
                 26421880,
                 "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"},
                {"train-labels-idx1-ubyte.gz",
                 {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
                  "train-labels-idx1-ubyte.gz",
                  "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"
                  "train-labels-idx1-ubyte.gz"},
                 "25c81989df183df01b3e8a0aad5dffbe",
                 "",
                 29515,
                 "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"},
                {"t10k-images-idx3-ubyte.gz",
                 {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
                  "t10k-images-idx3-ubyte.gz",
                  "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"
                  "t10k-images-idx3-ubyte.gz"},
                 "bef4ecab320f06d8554ea6380940ec79",
                 "",
                 4422102,
                 "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"},
                {"t10k-labels-idx1-ubyte.gz",
                 {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
                  "t10k-labels-idx1-ubyte.gz",
                  "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/"
                  "t10k-labels-idx1-ubyte.gz"},
                 "bb300cfdad3c16e7a12a480ee83cd310",
                 "",
                 5148,
                 "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"},
            }};
}

CatalogDataset cifar10() {
    return {"cifar-10",
            "CIFAR-10 (Krizhevsky), 50,000 + 10,000 32x32 colour images, binary version",
            "",
            "",
            {
                {"cifar-10-binary.tar.gz",
                 {"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"},
                 "c32a1d4ab5d03f1284b67883e8d87530",
                 "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
                 170052171,
                 ""},
            }};
}

std::vector<CatalogDataset> build_catalog() {
    return {mnist(), fashion_mnist(), cifar10()};
}

} // namespace

const std::vector<CatalogDataset>& dataset_catalog() {
    static const std::vector<CatalogDataset> catalog = build_catalog();
    return catalog;
}

const CatalogDataset* find_catalog_dataset(const std::string& name) {
    const std::string wanted = util::ascii_lower(name);
    const auto& catalog = dataset_catalog();
    for (const auto& dataset : catalog) {
        if (dataset.name == wanted) {
            return &dataset;
        }
    }
    // Common spellings: fashion_mnist, fmnist, cifar10.
    if (wanted == "fashion_mnist" || wanted == "fmnist" || wanted == "fashionmnist") {
        return &catalog[1];
    }
    if (wanted == "cifar10" || wanted == "cifar_10") {
        return &catalog[2];
    }
    return nullptr;
}

} // namespace dljob::app
