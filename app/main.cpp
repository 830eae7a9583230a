#include "app/commands.h"

int main(int argc, char** argv) {
  return vaecodec::app::run_cli(argc, argv);
}
