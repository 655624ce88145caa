// file_spec.h — internal to csrc/data: the text:/tokens:/jsonl: specs (docs/data.md).
#pragma once
#include <memory>
#include <string>

#include "zerotrain/data/dataset.h"

namespace zt {

// kind: "text", "tokens" or "jsonl"; body: what follows "kind:" (PATHS[,key=value]...).
std::unique_ptr<Dataset> make_file_dataset(const std::string& spec, const std::string& kind, const std::string& body,
                                           const DatasetShape& shape);

}  // namespace zt
