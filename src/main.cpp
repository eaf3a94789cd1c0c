#include <dljob/cli/cli.hpp>

int main(int argc, char** argv) {
    return dljob::cli::run(argc, argv);
}
