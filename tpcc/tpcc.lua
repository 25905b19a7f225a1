#!/usr/bin/env sysbench
-- TPC-C for sysbench, written from the TPC-C specification (revision 5.11):
-- the nine tables (clause 1.3), their population (4.3), the five
-- transactions in the standard mix (2.4-2.8, 5.2.3) and the consistency
-- conditions (3.3.2). See tpcc/README.md for what is standard and what is
-- scaled down.
--
--   sysbench tpcc/tpcc.lua --mysql-socket=S --mysql-user=root --mysql-db=tpcc \
--            --scale=1 [--items=N --customers=N] prepare|run|check|cleanup

sysbench.cmdline.options = {
   scale = {"Warehouses", 1},
   items = {"Rows of ITEM and of STOCK per warehouse (standard: 100000)", 100000},
   customers = {"Customers, and initial orders, per district (standard: 3000)", 3000},
   fixed_time = {"Use this timestamp instead of NOW() (deterministic runs)", ""},
   mysql_storage_engine = {"Storage engine", "InnoDB"},
}

local DISTRICTS = 10
-- NURand constants (2.1.6): C for C_LAST at load and run differ by a value
-- in [65, 119] other than 96 and 112 (2.1.6.1).
local C_LAST_LOAD, C_LAST_RUN, C_ID, C_OL_I_ID = 157, 223, 259, 7911

local function opt(name) return sysbench.opt[name] end

-- Our own generator: sysbench 1.0's --rand-seed does not reach custom
-- commands (prepare), and the end-to-end tests need a population and a
-- single-threaded run that repeat exactly. xorshift32, seeded from
-- --rand-seed and the thread (from the clock when --rand-seed is 0).
local state
local function seed_rng()
   local base = sysbench.opt.rand_seed ~= 0 and sysbench.opt.rand_seed or os.time()
   state = (base * 7919 + (sysbench.tid or 0) * 104729 + 1) % 4294967296
   if state == 0 then state = 2463534242 end
end

local function next_u32()
   if state == nil then seed_rng() end
   local x = state
   x = bit.bxor(x, bit.lshift(x, 13))
   x = bit.bxor(x, bit.rshift(x, 17))
   x = bit.bxor(x, bit.lshift(x, 5))
   state = x
   return x % 4294967296
end

local function rand(a, b) return a + next_u32() % (b - a + 1) end

local ALNUM = {}
for ch in ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"):gmatch(".") do ALNUM[#ALNUM + 1] = ch end
local DIGITS = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
local function rstring(n, alphabet, size)
   local t = {}
   for i = 1, n do t[i] = alphabet[rand(1, size)] end
   return table.concat(t)
end

-- sysbench runs LuaJIT (Lua 5.1): bit.bor, and no // operator
local function idiv(a, b) return math.floor(a / b) end

-- NURand(A, x, y) of 2.1.6
local function nurand(a, x, y, c)
   return ((bit.bor(rand(0, a), rand(x, y)) + c) % (y - x + 1)) + x
end

-- a-string and n-string of the spec (4.3.2.2), random length in [lo, hi]
local function astr(lo, hi)
   return rstring(rand(lo, hi), ALNUM, 62)
end
local function nstr(lo, hi)
   return rstring(rand(lo, hi), DIGITS, 10)
end

local SYLLABLES = {"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}
local function last_name(n)
   return SYLLABLES[idiv(n, 100) + 1] .. SYLLABLES[idiv(n, 10) % 10 + 1] .. SYLLABLES[n % 10 + 1]
end

local function now()
   if opt("fixed_time") ~= "" then
      return "'" .. opt("fixed_time") .. "'"
   end
   return "NOW()"
end

local function zip() return nstr(4, 4) .. "11111" end

-- "ORIGINAL" in 10% of I_DATA and S_DATA (4.3.3.1)
local function data_with_original(lo, hi)
   local s = astr(lo, hi)
   if rand(1, 10) == 1 then
      local pos = rand(1, #s - 8)
      s = s:sub(1, pos - 1) .. "ORIGINAL" .. s:sub(pos + 8)
   end
   return s
end

-- ---------------------------------------------------------------- schema

local SCHEMA = {
   [[CREATE TABLE warehouse (w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20),
      w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4),
      w_ytd DECIMAL(12,2), PRIMARY KEY (w_id))]],
   [[CREATE TABLE district (d_id TINYINT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10),
      d_street_1 VARCHAR(20), d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9),
      d_tax DECIMAL(4,4), d_ytd DECIMAL(12,2), d_next_o_id INT, PRIMARY KEY (d_w_id, d_id))]],
   [[CREATE TABLE customer (c_id INT NOT NULL, c_d_id TINYINT NOT NULL, c_w_id INT NOT NULL,
      c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20),
      c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16),
      c_since DATETIME, c_credit CHAR(2), c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4),
      c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2), c_payment_cnt INT, c_delivery_cnt INT,
      c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id), KEY idx_customer (c_w_id, c_d_id, c_last, c_first))]],
   -- HISTORY has no primary key in the spec; InnoDB gets a hidden one anyway
   [[CREATE TABLE history (h_id BIGINT NOT NULL AUTO_INCREMENT, h_c_id INT, h_c_d_id TINYINT, h_c_w_id INT,
      h_d_id TINYINT, h_w_id INT, h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24),
      PRIMARY KEY (h_id))]],
   [[CREATE TABLE new_orders (no_o_id INT NOT NULL, no_d_id TINYINT NOT NULL, no_w_id INT NOT NULL,
      PRIMARY KEY (no_w_id, no_d_id, no_o_id))]],
   [[CREATE TABLE orders (o_id INT NOT NULL, o_d_id TINYINT NOT NULL, o_w_id INT NOT NULL, o_c_id INT,
      o_entry_d DATETIME, o_carrier_id TINYINT, o_ol_cnt TINYINT, o_all_local TINYINT,
      PRIMARY KEY (o_w_id, o_d_id, o_id), KEY idx_orders (o_w_id, o_d_id, o_c_id, o_id))]],
   [[CREATE TABLE order_line (ol_o_id INT NOT NULL, ol_d_id TINYINT NOT NULL, ol_w_id INT NOT NULL,
      ol_number TINYINT NOT NULL, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity TINYINT,
      ol_amount DECIMAL(6,2), ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))]],
   [[CREATE TABLE item (i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2),
      i_data VARCHAR(50), PRIMARY KEY (i_id))]],
   [[CREATE TABLE stock (s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity SMALLINT,
      s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24),
      s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24),
      s_ytd INT, s_order_cnt SMALLINT, s_remote_cnt SMALLINT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id))]],
}
local TABLES = {"warehouse", "district", "customer", "history", "new_orders", "orders", "order_line", "item", "stock"}

-- Multi-row INSERTs of up to 500 rows.
local Batch = {}
Batch.__index = Batch
local function batch(con, head)
   return setmetatable({con = con, head = head, rows = {}}, Batch)
end
function Batch:add(row)
   self.rows[#self.rows + 1] = row
   if #self.rows == 500 then self:flush() end
end
function Batch:flush()
   if #self.rows > 0 then
      self.con:query(self.head .. " VALUES " .. table.concat(self.rows, ","))
      self.rows = {}
   end
end

local function q(s) return "'" .. s .. "'" end

local function load_items(con)
   local b = batch(con, "INSERT INTO item")
   for i = 1, opt("items") do
      b:add(string.format("(%d,%d,%s,%d.%02d,%s)", i, rand(1, 10000), q(astr(14, 24)), rand(1, 99),
                          rand(0, 99), q(data_with_original(26, 50))))
   end
   b:flush()
end

local function load_warehouse(con, w)
   local C = opt("customers")
   con:query(string.format("INSERT INTO warehouse VALUES (%d,%s,%s,%s,%s,%s,%s,0.%04d,%d)", w, q(astr(6, 10)),
      q(astr(10, 20)), q(astr(10, 20)), q(astr(10, 20)), q(astr(2, 2)), q(zip()), rand(0, 2000),
      DISTRICTS * C * 10))
   local b = batch(con, "INSERT INTO stock")
   for i = 1, opt("items") do
      local d = {}
      for k = 1, 10 do d[k] = q(astr(24, 24)) end
      b:add(string.format("(%d,%d,%d,%s,0,0,0,%s)", i, w, rand(10, 100), table.concat(d, ","),
                          q(data_with_original(26, 50))))
   end
   b:flush()
   local new_from = C - idiv(C * 3, 10) + 1         -- the last 30% of orders are undelivered (900 of 3000)
   for d = 1, DISTRICTS do
      con:query(string.format("INSERT INTO district VALUES (%d,%d,%s,%s,%s,%s,%s,%s,0.%04d,%d,%d)", d, w,
         q(astr(6, 10)), q(astr(10, 20)), q(astr(10, 20)), q(astr(10, 20)), q(astr(2, 2)), q(zip()),
         rand(0, 2000), C * 10, C + 1))
      local cb = batch(con, "INSERT INTO customer")
      local hb = batch(con, "INSERT INTO history (h_c_id,h_c_d_id,h_c_w_id,h_d_id,h_w_id,h_date,h_amount,h_data)")
      for c = 1, C do
         local last = c <= 1000 and last_name(c - 1) or last_name(nurand(255, 0, 999, C_LAST_LOAD))
         cb:add(string.format("(%d,%d,%d,%s,'OE',%s,%s,%s,%s,%s,%s,%s,%s,%s,50000.00,0.%04d,-10.00,10.00,1,0,%s)",
            c, d, w, q(astr(8, 16)), q(last), q(astr(10, 20)), q(astr(10, 20)), q(astr(10, 20)),
            q(astr(2, 2)), q(zip()), q(nstr(16, 16)), now(), rand(1, 10) == 1 and "'BC'" or "'GC'",
            rand(0, 5000), q(astr(300, 500))))
         hb:add(string.format("(%d,%d,%d,%d,%d,%s,10.00,%s)", c, d, w, d, w, now(), q(astr(12, 24))))
      end
      cb:flush()
      hb:flush()
      -- orders: one per customer, customers in a random permutation
      local perm = {}
      for c = 1, C do perm[c] = c end
      for i = C, 2, -1 do
         local j = rand(1, i)
         perm[i], perm[j] = perm[j], perm[i]
      end
      local ob = batch(con, "INSERT INTO orders")
      local lb = batch(con, "INSERT INTO order_line")
      local nb = batch(con, "INSERT INTO new_orders")
      for o = 1, C do
         local cnt = rand(5, 15)
         local delivered = o < new_from
         ob:add(string.format("(%d,%d,%d,%d,%s,%s,%d,1)", o, d, w, perm[o], now(),
                              delivered and tostring(rand(1, 10)) or "NULL", cnt))
         for n = 1, cnt do
            lb:add(string.format("(%d,%d,%d,%d,%d,%d,%s,5,%s,%s)", o, d, w, n, rand(1, opt("items")), w,
               delivered and now() or "NULL",
               delivered and "0.00" or string.format("%d.%02d", rand(0, 9999), rand(0, 99)),
               q(astr(24, 24))))
         end
         if not delivered then nb:add(string.format("(%d,%d,%d)", o, d, w)) end
      end
      ob:flush()
      lb:flush()
      nb:flush()
   end
end

function cmd_prepare()
   seed_rng()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   for _, sql in ipairs(SCHEMA) do
      con:query(sql .. " ENGINE=" .. opt("mysql_storage_engine"))
   end
   print(string.format("Loading %d items", opt("items")))
   con:query("BEGIN")
   load_items(con)
   con:query("COMMIT")
   for w = 1, opt("scale") do
      print(string.format("Loading warehouse %d of %d (%d customers per district)", w, opt("scale"),
                          opt("customers")))
      con:query("BEGIN")
      load_warehouse(con, w)
      con:query("COMMIT")
   end
end

function cmd_cleanup()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   for _, t in ipairs(TABLES) do
      con:query("DROP TABLE IF EXISTS " .. t)
   end
end

-- ------------------------------------------------------------ transactions

local function row(sql)
   return con:query_row(sql)
end

local counts

-- A customer by last name (60%) or by id (2.5.1.2, 2.6.1.2). By name: the
-- one at position ceil(n/2) of those with that name ordered by C_FIRST.
local function pick_customer(w, d)
   local C = opt("customers")
   if rand(1, 100) <= 60 then
      local hi = C < 1000 and C - 1 or 999
      local name = last_name(nurand(255, 0, hi, C_LAST_RUN) % (hi + 1))
      local rs = con:query(string.format("SELECT c_id FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_last='%s' "
                                         .. "ORDER BY c_first", w, d, name))
      local ids = {}
      for _ = 1, rs.nrows do ids[#ids + 1] = tonumber(rs:fetch_row()[1]) end
      if #ids > 0 then
         return ids[idiv(#ids + 1, 2)]
      end
   end
   return nurand(1023, 1, C, C_ID)
end

local function new_order()
   local W, w = opt("scale"), rand(1, opt("scale"))
   local d, c = rand(1, DISTRICTS), nurand(1023, 1, opt("customers"), C_ID)
   local cnt, rollback = rand(5, 15), rand(1, 100) == 1
   local lines, all_local = {}, 1
   for n = 1, cnt do
      local supply = w
      if W > 1 and rand(1, 100) == 1 then
         repeat supply = rand(1, W) until supply ~= w
         all_local = 0
      end
      local item = nurand(8191, 1, opt("items"), C_OL_I_ID)
      if rollback and n == cnt then item = opt("items") + 1 end   -- an unused item: the 1% that roll back
      lines[n] = {item = item, supply = supply, qty = rand(1, 10)}
   end
   con:query("BEGIN")
   row(string.format("SELECT w_tax FROM warehouse WHERE w_id=%d", w))
   local _tax, o = row(string.format("SELECT d_tax, d_next_o_id FROM district WHERE d_w_id=%d AND d_id=%d FOR UPDATE", w, d))
   o = tonumber(o)
   con:query(string.format("UPDATE district SET d_next_o_id=d_next_o_id+1 WHERE d_w_id=%d AND d_id=%d", w, d))
   row(string.format("SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d", w, d, c))
   con:query(string.format("INSERT INTO orders VALUES (%d,%d,%d,%d,%s,NULL,%d,%d)", o, d, w, c, now(), cnt, all_local))
   con:query(string.format("INSERT INTO new_orders VALUES (%d,%d,%d)", o, d, w))
   for n, l in ipairs(lines) do
      local price = row(string.format("SELECT i_price, i_name, i_data FROM item WHERE i_id=%d", l.item))
      if price == nil then
         con:query("ROLLBACK")                      -- 2.4.2.3: not found, the order is rolled back
         counts.rollback = counts.rollback + 1
         return
      end
      local sq = tonumber((row(string.format("SELECT s_quantity, s_dist_%02d, s_data FROM stock WHERE s_w_id=%d AND s_i_id=%d FOR UPDATE",
                                              d, l.supply, l.item))))
      local newq = sq >= l.qty + 10 and sq - l.qty or sq - l.qty + 91
      con:query(string.format("UPDATE stock SET s_quantity=%d, s_ytd=s_ytd+%d, s_order_cnt=s_order_cnt+1%s "
                              .. "WHERE s_w_id=%d AND s_i_id=%d", newq, l.qty,
                              l.supply ~= w and ", s_remote_cnt=s_remote_cnt+1" or "", l.supply, l.item))
      con:query(string.format("INSERT INTO order_line SELECT %d,%d,%d,%d,%d,%d,NULL,%d,%d*i_price,s_dist_%02d "
                              .. "FROM item, stock WHERE i_id=%d AND s_w_id=%d AND s_i_id=%d",
                              o, d, w, n, l.item, l.supply, l.qty, l.qty, d, l.item, l.supply, l.item))
   end
   con:query("COMMIT")
   counts.new_order = counts.new_order + 1
end

local function payment()
   local W, w = opt("scale"), rand(1, opt("scale"))
   local d = rand(1, DISTRICTS)
   local cw, cd = w, d
   if W > 1 and rand(1, 100) > 85 then
      repeat cw = rand(1, W) until cw ~= w
      cd = rand(1, DISTRICTS)
   end
   local amount = string.format("%d.%02d", rand(1, 4999), rand(0, 99))
   con:query("BEGIN")
   con:query(string.format("UPDATE warehouse SET w_ytd=w_ytd+%s WHERE w_id=%d", amount, w))
   local wname = row(string.format("SELECT w_name, w_street_1, w_city FROM warehouse WHERE w_id=%d", w))
   con:query(string.format("UPDATE district SET d_ytd=d_ytd+%s WHERE d_w_id=%d AND d_id=%d", amount, w, d))
   local dname = row(string.format("SELECT d_name, d_street_1, d_city FROM district WHERE d_w_id=%d AND d_id=%d", w, d))
   local c = pick_customer(cw, cd)
   local _bal, credit = row(string.format("SELECT c_balance, c_credit, c_data FROM customer WHERE c_w_id=%d AND c_d_id=%d "
                                          .. "AND c_id=%d FOR UPDATE", cw, cd, c))
   con:query(string.format("UPDATE customer SET c_balance=c_balance-%s, c_ytd_payment=c_ytd_payment+%s, "
                           .. "c_payment_cnt=c_payment_cnt+1%s WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d", amount, amount,
                           credit == "BC" and string.format(", c_data=LEFT(CONCAT('%d %d %d %d %d %s | ', c_data), 500)",
                                                            c, cd, cw, d, w, amount) or "",
                           cw, cd, c))
   con:query(string.format("INSERT INTO history (h_c_id,h_c_d_id,h_c_w_id,h_d_id,h_w_id,h_date,h_amount,h_data) "
                           .. "VALUES (%d,%d,%d,%d,%d,%s,%s,'%s    %s')", c, cd, cw, d, w, now(), amount, wname, dname))
   con:query("COMMIT")
   counts.payment = counts.payment + 1
end

local function order_status()
   local w, d = rand(1, opt("scale")), rand(1, DISTRICTS)
   con:query("BEGIN")
   local c = pick_customer(w, d)
   row(string.format("SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id=%d AND c_d_id=%d AND c_id=%d", w, d, c))
   local o = row(string.format("SELECT MAX(o_id) FROM orders WHERE o_w_id=%d AND o_d_id=%d AND o_c_id=%d", w, d, c))
   if o ~= nil then
      con:query(string.format("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line "
                              .. "WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%s", w, d, o))
   end
   con:query("COMMIT")
   counts.order_status = counts.order_status + 1
end

local function delivery()
   local w, carrier = rand(1, opt("scale")), rand(1, 10)
   con:query("BEGIN")
   for d = 1, DISTRICTS do
      local o = row(string.format("SELECT no_o_id FROM new_orders WHERE no_w_id=%d AND no_d_id=%d ORDER BY no_o_id "
                                  .. "LIMIT 1 FOR UPDATE", w, d))
      if o ~= nil then   -- 2.7.4.2: a district without new orders is skipped
         con:query(string.format("DELETE FROM new_orders WHERE no_w_id=%d AND no_d_id=%d AND no_o_id=%s", w, d, o))
         local c = row(string.format("SELECT o_c_id FROM orders WHERE o_w_id=%d AND o_d_id=%d AND o_id=%s", w, d, o))
         con:query(string.format("UPDATE orders SET o_carrier_id=%d WHERE o_w_id=%d AND o_d_id=%d AND o_id=%s", carrier, w, d, o))
         con:query(string.format("UPDATE order_line SET ol_delivery_d=%s WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%s",
                                 now(), w, d, o))
         local total = row(string.format("SELECT SUM(ol_amount) FROM order_line WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id=%s", w, d, o))
         con:query(string.format("UPDATE customer SET c_balance=c_balance+%s, c_delivery_cnt=c_delivery_cnt+1 "
                                 .. "WHERE c_w_id=%d AND c_d_id=%d AND c_id=%s", total, w, d, c))
      end
   end
   con:query("COMMIT")
   counts.delivery = counts.delivery + 1
end

local function stock_level()
   local w, d, threshold = rand(1, opt("scale")), rand(1, DISTRICTS), rand(10, 20)
   con:query("BEGIN")
   local next_o = tonumber((row(string.format("SELECT d_next_o_id FROM district WHERE d_w_id=%d AND d_id=%d", w, d))))
   row(string.format("SELECT COUNT(DISTINCT s_i_id) FROM order_line JOIN stock ON s_w_id=ol_w_id AND s_i_id=ol_i_id "
                     .. "WHERE ol_w_id=%d AND ol_d_id=%d AND ol_o_id BETWEEN %d AND %d AND s_quantity < %d",
                     w, d, next_o - 20, next_o - 1, threshold))
   con:query("COMMIT")
   counts.stock_level = counts.stock_level + 1
end

function thread_init()
   seed_rng()
   drv = sysbench.sql.driver()
   con = drv:connect()
   counts = {new_order = 0, payment = 0, order_status = 0, delivery = 0, stock_level = 0, rollback = 0}
end

-- The standard mix (5.2.3): at least 43% Payment, 4% each of Order-Status,
-- Delivery and Stock-Level; New-Order the rest.
function event()
   local r = rand(1, 100)
   if r <= 45 then new_order()
   elseif r <= 88 then payment()
   elseif r <= 92 then order_status()
   elseif r <= 96 then delivery()
   else stock_level() end
end

-- A deadlock or lock wait timeout (with --mysql-ignore-errors) restarts the
-- transaction from the beginning.
function sysbench.hooks.before_restart_event(err)
   con:query("ROLLBACK")
end

function thread_done()
   -- one write with its newline: print() writes the line and the newline
   -- apart, and two threads finishing together interleaved their lines
   io.write(string.format("tpcc thread %d: new_order %d (rolled back %d), payment %d, order_status %d, delivery %d, "
                          .. "stock_level %d\n", sysbench.tid, counts.new_order, counts.rollback, counts.payment,
                          counts.order_status, counts.delivery, counts.stock_level))
   io.stdout:flush()
   con:disconnect()
end

-- -------------------------------------------------------- consistency (3.3.2)

local CHECKS = {
   {1, "W_YTD = sum(D_YTD)",
    [[SELECT COUNT(*) FROM warehouse w WHERE w.w_ytd <> (SELECT SUM(d_ytd) FROM district WHERE d_w_id = w.w_id)]]},
   {2, "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
    [[SELECT COUNT(*) FROM district d WHERE d.d_next_o_id - 1 <> (SELECT MAX(o_id) FROM orders WHERE o_w_id = d.d_w_id AND o_d_id = d.d_id)
      OR d.d_next_o_id - 1 <> COALESCE((SELECT MAX(no_o_id) FROM new_orders WHERE no_w_id = d.d_w_id AND no_d_id = d.d_id), d.d_next_o_id - 1)]]},
   {3, "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
    [[SELECT COUNT(*) FROM (SELECT MAX(no_o_id) - MIN(no_o_id) + 1 AS span, COUNT(*) AS n FROM new_orders
      GROUP BY no_w_id, no_d_id) x WHERE span <> n]]},
   {4, "sum(O_OL_CNT) = rows in ORDER-LINE",
    [[SELECT COUNT(*) FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS s FROM orders GROUP BY o_w_id, o_d_id) o
      JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS n FROM order_line GROUP BY ol_w_id, ol_d_id) l
      ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id WHERE o.s <> l.n]]},
   {5, "O_CARRIER_ID is null exactly for orders in NEW-ORDER",
    [[SELECT COUNT(*) FROM orders o LEFT JOIN new_orders n ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id
      WHERE (o.o_carrier_id IS NULL) <> (n.no_o_id IS NOT NULL)]]},
   {6, "O_OL_CNT = the order's ORDER-LINE rows",
    [[SELECT COUNT(*) FROM orders o WHERE o.o_ol_cnt <> (SELECT COUNT(*) FROM order_line
      WHERE ol_w_id = o.o_w_id AND ol_d_id = o.o_d_id AND ol_o_id = o.o_id)]]},
   {7, "OL_DELIVERY_D is null exactly when O_CARRIER_ID is null",
    [[SELECT COUNT(*) FROM order_line l JOIN orders o ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id AND o.o_id = l.ol_o_id
      WHERE (l.ol_delivery_d IS NULL) <> (o.o_carrier_id IS NULL)]]},
   {8, "W_YTD = sum(H_AMOUNT)",
    [[SELECT COUNT(*) FROM warehouse w WHERE w.w_ytd <> (SELECT SUM(h_amount) FROM history WHERE h_w_id = w.w_id)]]},
   {9, "D_YTD = sum(H_AMOUNT)",
    [[SELECT COUNT(*) FROM district d WHERE d.d_ytd <> (SELECT SUM(h_amount) FROM history WHERE h_w_id = d.d_w_id AND h_d_id = d.d_id)]]},
   -- 10 and 12 sum each customer's delivered order lines and payments
   -- once, in derived tables grouped by customer, not in a subquery per
   -- customer: HISTORY has no index on the customer, and after a long run
   -- a correlated subquery scanned it once per customer (30,000 scans per
   -- warehouse; more than 15 minutes after 10 minutes of load)
   {10, "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)",
    [[SELECT COUNT(*) FROM customer c
      LEFT JOIN (SELECT o.o_w_id AS w, o.o_d_id AS d, o.o_c_id AS cid, SUM(l.ol_amount) AS s FROM orders o
                 JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
                 WHERE l.ol_delivery_d IS NOT NULL GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) dl
        ON dl.w = c.c_w_id AND dl.d = c.c_d_id AND dl.cid = c.c_id
      LEFT JOIN (SELECT h_c_w_id AS w, h_c_d_id AS d, h_c_id AS cid, SUM(h_amount) AS s FROM history
                 GROUP BY h_c_w_id, h_c_d_id, h_c_id) h
        ON h.w = c.c_w_id AND h.d = c.c_d_id AND h.cid = c.c_id
      WHERE c.c_balance <> COALESCE(dl.s, 0) - COALESCE(h.s, 0)]]},
   {12, "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT)",
    [[SELECT COUNT(*) FROM customer c
      LEFT JOIN (SELECT o.o_w_id AS w, o.o_d_id AS d, o.o_c_id AS cid, SUM(l.ol_amount) AS s FROM orders o
                 JOIN order_line l ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
                 WHERE l.ol_delivery_d IS NOT NULL GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) dl
        ON dl.w = c.c_w_id AND dl.d = c.c_d_id AND dl.cid = c.c_id
      WHERE c.c_balance + c.c_ytd_payment <> COALESCE(dl.s, 0)]]},
}

function cmd_check()
   local drv = sysbench.sql.driver()
   local c = drv:connect()
   local failed = 0
   for _, chk in ipairs(CHECKS) do
      local bad = tonumber((c:query_row(chk[3])))
      print(string.format("consistency condition %2d (%s): %s", chk[1], chk[2],
                          bad == 0 and "PASS" or string.format("FAIL (%d violating rows or groups)", bad)))
      if bad ~= 0 then failed = failed + 1 end
   end
   c:disconnect()
   if failed > 0 then
      print(string.format("%d consistency condition(s) FAILED", failed))
      os.exit(1)
   end
   print("all consistency conditions hold")
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare},
   cleanup = {cmd_cleanup},
   check = {cmd_check},
}
