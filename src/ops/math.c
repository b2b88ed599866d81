/* Operator family 'math' (see families.h). Rows are added as translators land. */
#include "ops/families.h"

const op_row ops_math_rows[] = {
    OP_ROWS_END,
};
