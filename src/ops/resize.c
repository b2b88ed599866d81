/*
 * Resize and Upsample (under construction).
 */
#include "ops/families.h"

const op_row ops_resize_rows[] = {
    OP_ROWS_END,
};
