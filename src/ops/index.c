/* Operator family 'index' (see families.h). Rows are added as translators land. */
#include "ops/families.h"

const op_row ops_index_rows[] = {
    OP_ROWS_END,
};
