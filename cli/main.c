#include <stdio.h>
int main(void) { puts("trit"); return 0; }
