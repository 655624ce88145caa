// tfevents.h — TensorBoard event files, encoded natively (no protobuf library).
//
// An event file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   `length` bytes of data        | uint32 masked CRC-32C of the data,
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Each record's data is one serialized
// tensorboard.Event protobuf; the fields written are
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record of a file carries file_version "brain.Event:2" and no summary; every other
// record one scalar (what torch.utils.tensorboard's SummaryWriter.add_scalar writes). As in
// proto3, a zero step is not written.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace zt {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven; crc32c("123456789") ==
// 0xE3069283. `crc` continues a previous call's result.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t bytes);

// One TFRecord around `data` (length, its masked CRC, data, the data's masked CRC).
std::string tfrecord(const std::string& data);

// Serialized Event messages.
std::string file_version_event(double wall_time_s);
std::string scalar_event(double wall_time_s, int64_t step, const std::string& tag, float value);

}  // namespace zt
