#include "check.h"
int main(void) { return CHECK_DONE(); }
