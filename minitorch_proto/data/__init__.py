"""Multiple-instance data: containers, downloads, readers, benchmarks, synthetic bags, MNIST-bags.

A *bag* is a 2-D array (instances x features) with one label for the whole bag;
:class:`BagDataset` holds a list of them with their labels and ids.

=================  =====================================================================
module             what it holds
=================  =====================================================================
``containers``     :class:`BagDataset`
``download``       the one downloader and the one cache rule (:func:`default_cache_dir`)
``readers``        the CSV collection, PRTools ``.mat`` files, the user's CSV/DataFrame
``csv_checks``     what a CSV must satisfy: header, row widths, separator, ids and labels as written
``benchmarks``     Musk1, Musk2, Fox, Tiger, Elephant: :func:`load_benchmark`, split files
``pathology``      UCSB breast cancer, a real histopathology set: :func:`load_pathology`
``synthetic``      the toy problem of the paper's Figure 1 and the MIL unit-test generators
``disk``           bags stored one file per bag (.npy/.pt/.h5), read lazily
``mnist_bags``     MNIST images and MNIST-bags
=================  =====================================================================
"""
from .benchmarks import BENCHMARKS, BenchmarkInfo, load_benchmark, read_split_files
from .containers import BagDataset
from .disk import DiskBagDataset, write_bag_folder
from .download import (
    CACHE_ENV_VAR,
    DATA_ENV_VAR,
    ChecksumError,
    DownloadError,
    default_cache_dir,
    download_file,
    sha256_of,
)
from .pathology import PATHOLOGY, load_pathology
from .readers import from_dataframe, load_bags_csv, read_mil_csv, read_mil_mat
from .synthetic import (
    MIL_UNIT_TESTS,
    SyntheticBags,
    make_false_frequency_test,
    make_multi_concept_test,
    make_single_concept_test,
    make_toy_bags,
)

__all__ = [
    "BENCHMARKS",
    "CACHE_ENV_VAR",
    "DATA_ENV_VAR",
    "PATHOLOGY",
    "BagDataset",
    "DiskBagDataset",
    "BenchmarkInfo",
    "ChecksumError",
    "DownloadError",
    "default_cache_dir",
    "download_file",
    "from_dataframe",
    "load_bags_csv",
    "load_benchmark",
    "load_pathology",
    "read_mil_csv",
    "read_mil_mat",
    "read_split_files",
    "sha256_of",
    "write_bag_folder",
    # synthetic bags: the toy problem and the MIL unit-test generators
    "MIL_UNIT_TESTS",
    "SyntheticBags",
    "make_false_frequency_test",
    "make_multi_concept_test",
    "make_single_concept_test",
    "make_toy_bags",
]
