#pragma once
// The datasets `dljob fetch-data NAME` knows: their files, mirrors, published checksums and the
// Debian packages that ship them.

#include <cstdint>
#include <string>
#include <vector>

namespace dljob::app {

struct CatalogFile {
    std::string name;              // file name in the target directory
    std::vector<std::string> urls; // mirrors, tried in order
    std::string md5;               // the published checksum (torchvision's lists, the authors')
    std::string sha256;            // where known
    std::uint64_t size = 0;        // bytes; 0 when unknown
    /// SHA-256 of the file as a Debian package ships it, when the package recompressed it.
    std::string debian_sha256;
};

struct CatalogDataset {
    std::string name; // what `fetch-data NAME` takes
    std::string description;
    std::string debian_package; // ships the files, so no network is needed ("" when none)
    std::string debian_dir;     // where that package puts them
    std::vector<CatalogFile> files;
};

/// The datasets of the seeds' tutorials, with their usual mirrors and known checksums.
const std::vector<CatalogDataset>& dataset_catalog();
const CatalogDataset* find_catalog_dataset(const std::string& name);

} // namespace dljob::app
