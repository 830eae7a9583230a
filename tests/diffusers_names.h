#pragma once

// Original Wan weight names -> diffusers' (AutoencoderKLWan), for the tests of the loader's diffusers layout
// and of diffusers model folders.

#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace vaecodec::test {

inline std::string replace_all(std::string s, const std::vector<std::pair<std::regex, std::string>>& rules) {
  for (const auto& [pattern, replacement] : rules) {
    s = std::regex_replace(s, pattern, replacement);
  }
  return s;
}

// Original Wan names -> diffusers AutoencoderKLWan names, from diffusers' module tree, for the parts that
// Wan2.1 and Wan2.2 share. Written independently of the loader's mapping, which must undo it.
inline std::string wan_shared_to_diffusers(const std::string& name) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex(R"(^conv1\.)"), "quant_conv."},
      {std::regex(R"(^conv2\.)"), "post_quant_conv."},
      {std::regex(R"(^(encoder|decoder)\.conv1\.)"), "$1.conv_in."},
      {std::regex(R"(^(encoder|decoder)\.head\.0\.)"), "$1.norm_out."},
      {std::regex(R"(^(encoder|decoder)\.head\.2\.)"), "$1.conv_out."},
      {std::regex(R"(\.middle\.0\.)"), ".mid_block.resnets.0."},
      {std::regex(R"(\.middle\.1\.)"), ".mid_block.attentions.0."},
      {std::regex(R"(\.middle\.2\.)"), ".mid_block.resnets.1."},
      {std::regex(R"(\.residual\.0\.)"), ".norm1."},
      {std::regex(R"(\.residual\.2\.)"), ".conv1."},
      {std::regex(R"(\.residual\.3\.)"), ".norm2."},
      {std::regex(R"(\.residual\.6\.)"), ".conv2."},
      {std::regex(R"(\.shortcut\.)"), ".conv_shortcut."},
  };
  return replace_all(name, rules);
}

// Wan2.1 with 2 residual blocks per stage: the decoder's flat list 0..14 is 4 up blocks of 3 resnets, each
// but the last followed by an upsampler.
inline std::string wan21_to_diffusers(const std::string& name) {
  std::smatch m;
  std::string head = name;
  static const std::regex decoder(R"(^decoder\.upsamples\.(\d+)\.(.*)$)");
  if (std::regex_match(name, m, decoder)) {
    const int i = std::stoi(m[1]);
    const int block = i / 4;
    const std::string inner = i % 4 == 3 ? "upsamplers.0" : "resnets." + std::to_string(i % 4);
    head = "decoder.up_blocks." + std::to_string(block) + "." + inner + "." + m[2].str();
  }
  static const std::regex encoder(R"(^encoder\.downsamples\.)");
  head = std::regex_replace(head, encoder, "encoder.down_blocks.");
  return wan_shared_to_diffusers(head);
}

// Wan2.2 (diffusers' is_residual blocks), 2 residual blocks per stage: encoder blocks hold 2 resnets and a
// downsampler, decoder blocks 3 resnets and an upsampler.
inline std::string wan22_to_diffusers(const std::string& name) {
  std::smatch m;
  std::string head = name;
  static const std::regex encoder(R"(^encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\.(.*)$)");
  static const std::regex decoder(R"(^decoder\.upsamples\.(\d+)\.upsamples\.(\d+)\.(.*)$)");
  if (std::regex_match(name, m, encoder)) {
    const int j = std::stoi(m[2]);
    head = "encoder.down_blocks." + m[1].str() + "." +
           (j < 2 ? "resnets." + std::to_string(j) : std::string("downsampler")) + "." + m[3].str();
  } else if (std::regex_match(name, m, decoder)) {
    const int j = std::stoi(m[2]);
    head = "decoder.up_blocks." + m[1].str() + "." +
           (j < 3 ? "resnets." + std::to_string(j) : std::string("upsampler")) + "." + m[3].str();
  }
  return wan_shared_to_diffusers(head);
}

}  // namespace vaecodec::test
