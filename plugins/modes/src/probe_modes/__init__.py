"""probe data modes (statistics, md5, tensor, overflow) and their comparators."""
